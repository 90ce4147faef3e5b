"""The GPU check: headloc's ablation engine on a real accelerator, in one short run (at most ~8 min;
benchmarks/gpu_check.py runs it).

Needs torch, transformers, accelerate, numpy, scipy and scikit-learn only (no lm-eval, no
Snakemake, no network, no model files): every model is built on the spot. :func:`run_checks` runs,
in order:

1. **planted**: a small Llama trained here (a few seconds on a GPU) so that one head alone copies
   the first token to the last position (:func:`headloc.groundtruth.copy_head.plant_copy_head`);
   the search's score is the gold token's mean log-probability over the documents, many masks
   sharing each forward pass (one gate row per batch row, as the engine does:
   :func:`~headloc.benchmarks.gpu_scores.gold_scores`).
   Checks: ablating the planted head destroys the task, the single-head ranking puts it first.
2. **bf16**: the same 16 cs_stratified masks and every single-head ablation scored in float32 and
   bfloat16: the largest score difference, the rank correlation of the single-head effects, and
   whether the top head agrees.
3. **device_map**: the planted model split over the GPU and the CPU (accelerate's
   ``dispatch_model``): the masked scores must equal the single-device ones (the head hooks follow
   each layer to its device).
4. **throughput**: random-weight models of Llama-3.2-1B's and Llama-3.1-8B's geometry in bfloat16:
   masks per second and tokens per second at 1, 8 and 32 masks per pass, against the card's
   measured bf16 matrix-multiply rate; the peak memory against headloc.model.memory's estimate.
5. **backoff**: a pass far too large for the card (8B geometry, every position's logits kept):
   :class:`headloc.engine.backoff.RowBudget` must halve its way to a size that fits, and the scores
   must equal a run started at that size.
6. **gpu slot**: one process per visible GPU, each started as the workflow's evaluating scripts
   start (:func:`headloc.workflow.jobs.start_evaluating_job`, the claim's return value dropped):
   each sees one GPU, no two share one, and one process more waits until a first one exits.
7. **engine** (only where lm-eval is installed and a tokenizer folder is given): headloc's own
   evaluator (:class:`headloc.engine.evaluation.MaskEvaluator`, lm-eval inside) on the same random
   1B and 8B models in bfloat16, ioi (log-likelihood) and capitals (generation): one mask at a
   time, 8 masks sharing each pass, and ``batch_size: auto``; their agreement and masks per second.

``quick`` runs the same code on small shapes (a smoke run on a CPU). Every figure and check goes
to a :class:`~headloc.benchmarks.gpu_scores.Report`; a check that fails is listed in ``Report.failed``.
The sections live in their own modules: :mod:`~headloc.benchmarks.gpu_planted` (1-3),
:mod:`~headloc.benchmarks.gpu_throughput` (4-5), :mod:`~headloc.benchmarks.gpu_slots` (6) and
:mod:`~headloc.benchmarks.gpu_engine` (7), over what they share (:mod:`~headloc.benchmarks.gpu_scores`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from headloc.benchmarks.gpu_engine import engine_section
from headloc.benchmarks.gpu_planted import planted_section
from headloc.benchmarks.gpu_scores import Report
from headloc.benchmarks.gpu_slots import slot_section
from headloc.benchmarks.gpu_throughput import throughput_section

SECTIONS = ("planted", "throughput", "slot", "engine")


def run_checks(device: str, *, quick: bool = False, skip=(), tokenizer: Path | None = None,
               engine_dtype: str = "bfloat16", log=print) -> Report:
    """Every section not in ``skip`` (of :data:`SECTIONS`) on ``device``; the GPU slots only on a
    GPU, the engine only with a ``tokenizer`` folder."""
    import platform

    import transformers

    unknown = sorted(set(skip) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown sections {unknown}; expected some of {', '.join(SECTIONS)}")
    report = Report(log=log)
    cuda = device.startswith("cuda")
    report.say("machine", "device", torch.cuda.get_device_name() if cuda else platform.processor() or "cpu")
    report.say("machine", "torch / transformers", f"{torch.__version__} / {transformers.__version__}")
    if cuda:
        report.say("machine", "GPU memory GiB", round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))
    start = time.perf_counter()
    if "planted" not in skip:
        planted_section(report, device, quick)
    if "throughput" not in skip:
        throughput_section(report, device, quick)
    if "slot" not in skip and cuda:
        slot_section(report)
    if "engine" not in skip and tokenizer:
        engine_section(report, device, tokenizer, quick, engine_dtype)
    report.say("machine", "seconds in all", time.perf_counter() - start)
    return report
