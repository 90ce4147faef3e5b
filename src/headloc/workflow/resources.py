"""Memory and wall time of the evaluation (GPU) jobs: sized from the model, growing with retries.

Snakemake passes ``attempt`` (1, 2, ...) to a rule's resource callables (rules/resources.smk hands
them :class:`EvalResources`); with ``--retries N`` (the SLURM profile sets 2) a job killed for
running out of memory or time is resubmitted with more of both: the first attempt's value times the
attempt (1x, 2x, 3x), never more than a cap.

Host memory of the first attempt: :data:`BASE_MEM_MB` (Python, torch, lm-eval, the data) plus
:data:`WEIGHT_FACTOR` times the model's weights in the configured dtype (loading holds them once,
plus conversion buffers). The parameter count is read offline
(:func:`headloc.model.memory.source_parameters`): a checkpoint folder's config.json, a hub model's
in the local Hugging Face cache, a GGUF file's size, or, for an uncached hub id, the size in its name
("...-8B-..."); a model none of these size gets :data:`UNKNOWN_MODEL_MEM_MB`.

Environment variables (read where Snakemake starts; see docs/slurm.md):
  HEADLOC_EVAL_MEM_MB   first-attempt memory in MB for every model (replaces the estimate)
  HEADLOC_EVAL_RUNTIME  first-attempt wall time in minutes (default EVAL_RUNTIME)
  HEADLOC_MAX_MEM_MB    never ask for more memory than this (the memory of your largest GPU node)
  HEADLOC_MAX_RUNTIME   never ask for more minutes than this (your GPU partition's MaxTime)
Without the caps a retry may ask for more than any node has; sbatch then refuses the job
("Requested node configuration is not available") and the retry is lost.

>>> resources = EvalResources({"models": {}}, environ={"HEADLOC_MAX_RUNTIME": "300"})
>>> resources.mem_mb(None, 1), [resources.runtime(attempt) for attempt in (1, 2, 3)]
(32000, [120, 240, 300])
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from headloc.model.loading import resolve_source
from headloc.model.memory import DTYPE_BYTES, source_parameters

EVAL_RUNTIME = 120  # minutes of the first attempt
BASE_MEM_MB = 4000  # host memory without the model
WEIGHT_FACTOR = 1.5  # host memory per byte of weights while loading
UNKNOWN_MODEL_MEM_MB = 32000  # a model of unknown size: enough for 8B parameters in bf16


def positive_int_env(name: str, environ: Mapping[str, str] = os.environ) -> int | None:
    """An environment variable holding a positive whole number, or None when unset or empty.

    >>> positive_int_env("N", {"N": " 64000 "}), positive_int_env("N", {"N": ""})
    (64000, None)
    """
    value = environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) == 0:
        raise ValueError(f"environment variable {name}={value!r}: expected a positive whole number (or unset)")
    return int(value)


def grow(first: int, attempt: int, cap: int | None) -> int:
    """first x attempt, at most cap (when set): a retry never asks for more than a node has.

    >>> grow(6000, 3, None), grow(6000, 3, 16000)
    (18000, 16000)
    """
    value = first * attempt
    return min(value, cap) if cap else value


def weights_mem_mb(parameters: int | None, dtype: str | None) -> int:
    """First-attempt host memory in MB for a model of ``parameters`` in ``dtype`` (rounded up to 1000).

    >>> weights_mem_mb(134_515_008, "float32"), weights_mem_mb(None, "bfloat16")
    (5000, 32000)
    """
    if parameters is None:
        return UNKNOWN_MODEL_MEM_MB
    weights_mb = parameters * DTYPE_BYTES.get(dtype or "float32", 4) / 1e6
    return 1000 * math.ceil((BASE_MEM_MB + WEIGHT_FACTOR * weights_mb) / 1000)


class EvalResources:
    """The memory and time callables of the evaluation rules, for one config.

    The environment is read on every call, as the job is scheduled (so a bad value fails that job's
    scheduling, not the parse); each model's size is read once.
    """

    def __init__(self, config: Mapping, environ: Mapping[str, str] = os.environ):
        self.config, self.environ = config, environ
        self._model_mem_mb: dict[str | None, int] = {}

    def model_mem_mb(self, model: str | None) -> int:
        """First-attempt host memory in MB for a model of the config (None, or a name the config
        lacks: :data:`UNKNOWN_MODEL_MEM_MB`)."""
        if model not in self._model_mem_mb:
            spec = self.config.get("models", {}).get(model) if model else None
            parameters = source_parameters(resolve_source(spec["source"])) if spec else None
            self._model_mem_mb[model] = weights_mem_mb(parameters, spec.get("dtype") if spec else None)
        return self._model_mem_mb[model]

    def mem_mb(self, model: str | None, attempt: int) -> int:
        """Host memory in MB: the model's estimate (or HEADLOC_EVAL_MEM_MB) times the attempt."""
        first = positive_int_env("HEADLOC_EVAL_MEM_MB", self.environ) or self.model_mem_mb(model)
        return grow(first, attempt, positive_int_env("HEADLOC_MAX_MEM_MB", self.environ))

    def runtime(self, attempt: int) -> int:
        """Wall time in minutes: EVAL_RUNTIME (or HEADLOC_EVAL_RUNTIME) times the attempt."""
        first = positive_int_env("HEADLOC_EVAL_RUNTIME", self.environ) or EVAL_RUNTIME
        return grow(first, attempt, positive_int_env("HEADLOC_MAX_RUNTIME", self.environ))

