"""The memory plan of a config's GPU models, checked when the Snakefile is parsed.

Per model on a GPU (``device: cuda...`` or a ``device_map``): the estimated peak of its evaluation
passes (:mod:`headloc.model.memory`: weights, KV cache at the longest context plus generation, kept
logits, activations) against the GPU's memory. The documents are not tokenized at parse time, so
the context is assumed to be :data:`CONTEXT_TOKENS` tokens, and generation the longest
``max_gen_toks`` of the configured tasks. Two warnings, never an error (the estimate is an estimate):

* the weights and one row do not fit on one GPU (and no ``device_map``): every job would fail;
* the configured ``batch_size`` does not fit: its first passes will run out of memory and back off
  (headloc.engine.backoff) to about the size that fits, which the warning names.

A GPU model whose sizes cannot be read offline (a hub model not in the local cache, a GGUF file)
gets no plan, and a line saying so.

The GPU's memory: ``HEADLOC_GPU_MEMORY_GB`` when set (a Slurm login node has no GPU), else the
smallest GPU ``nvidia-smi`` lists here; neither, and nothing is checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from headloc.heads import BATCH_SIZE
from headloc.model.loading import resolve_source
from headloc.model.memory import GIB, Pass, Shape, estimate, gpu_memory, offline_config, resolve_rows, rows_that_fit

CONTEXT_TOKENS = 2048  # the context assumed at parse time
GENERATION_TOKENS = 256  # lm-eval's max_gen_toks when a generation task sets none
KEPT_POSITIONS = 64  # positions whose logits a mask group keeps (the scored continuation)


def gpu_memory_bytes(environ=os.environ) -> int | None:
    """The memory to plan for: HEADLOC_GPU_MEMORY_GB, else the smallest local GPU; None if unknown."""
    value = environ.get("HEADLOC_GPU_MEMORY_GB", "").strip()
    if value:
        try:
            return int(float(value) * GIB)
        except ValueError:
            raise ValueError(f"environment variable HEADLOC_GPU_MEMORY_GB={value!r}: expected a number of GiB") from None
    cards = gpu_memory()
    return min(cards) if cards else None


def generation_tokens(task_yamls: Mapping[str, dict]) -> int:
    """The longest generation of the configured tasks (0 when none generates)."""
    longest = 0
    for task_config in task_yamls.values():
        if task_config.get("output_type") == "generate_until":
            kwargs = task_config.get("generation_kwargs") or {}
            longest = max(longest, int(kwargs.get("max_gen_toks", GENERATION_TOKENS)))
    return longest


def plan_warnings(config: Mapping, task_yamls: Mapping[str, dict], memory: int | None = None) -> list[str]:
    """One warning per GPU model whose evaluation passes may not fit in ``memory`` bytes (default:
    :func:`gpu_memory_bytes`, asked only when a model is on a GPU), and one per GPU model whose
    sizes cannot be read offline, saying that no plan was made for it."""
    on_gpu = {name: spec for name, spec in config["models"].items()
              if str(spec.get("device", "cpu")).startswith("cuda") or spec.get("device_map")}
    memory = memory if memory is not None or not on_gpu else gpu_memory_bytes()
    if memory is None:
        return []
    generation = generation_tokens(task_yamls)
    warnings = []
    for name, spec in on_gpu.items():
        source = resolve_source(spec["source"])
        model_config = offline_config(source)
        shape = Shape.of(model_config) if model_config else None
        warning = _model_warning(name, spec, shape, generation, memory) if shape else _no_plan(name, source)
        if warning:
            warnings.append(warning)
    return warnings


def _no_plan(name: str, source) -> str:
    """The one line for a GPU model whose sizes are unknown at parse time: no plan was made."""
    if source.form == "hub":
        why = f"its config.json is not in the local Hugging Face cache (hub id {source.location})"
    elif source.form == "gguf":
        why = "a GGUF file's sizes are read only when the job converts it"
    else:
        why = f"{source.location}/config.json does not give its sizes"
    return (f"models.{name}: no memory plan made: {why}; its jobs still halve their rows per pass when "
            "they run out of GPU memory")


def _model_warning(name: str, spec: Mapping, shape: Shape, generation: int, memory: int) -> str | None:
    dtype, per_pass = spec.get("dtype", "float32"), spec.get("masks_per_pass", 1)
    step = Pass(1, CONTEXT_TOKENS, generation, KEPT_POSITIONS if per_pass > 1 else None)
    fits = rows_that_fit(shape, dtype, step, memory)
    where = f"models.{name}: on a GPU of {memory / GIB:.0f} GiB, assuming {CONTEXT_TOKENS}-token contexts"
    if fits == 0 and not spec.get("device_map"):
        need = estimate(shape, dtype, step)
        return (f"{where}: the model does not fit ({need.describe()} for one row); set device_map: auto "
                "to spread it over several GPUs, or a smaller dtype")
    if spec.get("batch_size") == "auto" or fits == 0:
        return None
    rows = resolve_rows(spec.get("batch_size", BATCH_SIZE), "cuda")
    if rows <= fits:
        return None
    need = estimate(shape, dtype, Pass(rows, CONTEXT_TOKENS, generation, step.kept))
    return (f"{where}: batch_size {rows} needs about {need.describe()}; about {fits} rows fit. Long "
            f"passes will run out of memory and halve their rows until they fit (slower at first); "
            f"batch_size {max(per_pass, fits)} or auto avoids that")
