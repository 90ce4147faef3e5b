"""Memory and wall time of the evaluation (GPU) rules: sized from the model, growing with retries.

Snakemake passes `attempt` (1, 2, ...) to resource callables; with `--retries N` (the SLURM
profile sets 2) a job killed for running out of memory or time is resubmitted with more of both:
the first attempt's value times the attempt (1x, 2x, 3x), never more than a cap.

Host memory of the first attempt: BASE_MEM_MB (Python, torch, lm-eval, the data) plus 1.5x the
model's weights in the configured dtype (loading holds them once, plus conversion buffers). The
parameter count is read offline from the model's config.json (a checkpoint folder, or a hub model
in the local Hugging Face cache), estimated from a GGUF file's size, or, for an uncached hub id,
taken from its name ("...-8B-..."); a model none of these size gets UNKNOWN_MODEL_MEM_MB.

Environment variables (read where Snakemake starts; see docs/slurm.md):
  HEADLOC_EVAL_MEM_MB   first-attempt memory in MB for every model (replaces the estimate)
  HEADLOC_EVAL_RUNTIME  first-attempt wall time in minutes (default EVAL_RUNTIME)
  HEADLOC_MAX_MEM_MB    never ask for more memory than this (the memory of your largest GPU node)
  HEADLOC_MAX_RUNTIME   never ask for more minutes than this (your GPU partition's MaxTime)
Without the caps a retry may ask for more than any node has; sbatch then refuses the job
("Requested node configuration is not available") and the retry is lost.
"""

import math
import os

from headloc.model.loading import resolve_source
from headloc.model.memory import DTYPE_BYTES, source_parameters

EVAL_RUNTIME = 120  # minutes of the first attempt
BASE_MEM_MB = 4000  # host memory without the model
WEIGHT_FACTOR = 1.5  # host memory per byte of weights while loading
# a model of unknown size: enough for 8B parameters in bf16
UNKNOWN_MODEL_MEM_MB = 32000


def positive_int_env(name):
    """An environment variable holding a positive whole number, or None when unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) == 0:
        raise ValueError(
            f"environment variable {name}={value!r}: expected a positive whole number (or unset)"
        )
    return int(value)


_MODEL_MEM_MB = {}


def model_mem_mb(name):
    """First-attempt host memory in MB for a model of the config (rounded up to 1000)."""
    if name not in _MODEL_MEM_MB:
        spec = config.get("models", {}).get(name) if name else None
        parameters = source_parameters(resolve_source(spec["source"])) if spec else None
        if parameters is None:
            _MODEL_MEM_MB[name] = UNKNOWN_MODEL_MEM_MB
        else:
            dtype = spec.get("dtype") or "float32"
            weights_mb = parameters * DTYPE_BYTES.get(dtype, 4) / 1e6
            _MODEL_MEM_MB[name] = 1000 * math.ceil(
                (BASE_MEM_MB + WEIGHT_FACTOR * weights_mb) / 1000
            )
    return _MODEL_MEM_MB[name]


def grow(first, attempt, cap):
    """first x attempt, at most cap (when set): a retry never asks for more than a node has."""
    value = first * attempt
    return min(value, cap) if cap else value


def eval_mem_mb(wildcards, attempt):
    """Host memory in MB: the model's estimate (or HEADLOC_EVAL_MEM_MB) times the attempt."""
    first = positive_int_env("HEADLOC_EVAL_MEM_MB") or model_mem_mb(
        getattr(wildcards, "model", None)
    )
    return grow(first, attempt, positive_int_env("HEADLOC_MAX_MEM_MB"))


def eval_runtime(wildcards, attempt):
    """Wall time in minutes: EVAL_RUNTIME (or HEADLOC_EVAL_RUNTIME) times the attempt."""
    first = positive_int_env("HEADLOC_EVAL_RUNTIME") or EVAL_RUNTIME
    return grow(first, attempt, positive_int_env("HEADLOC_MAX_RUNTIME"))
