"""The GPU check's section 7 (:mod:`headloc.benchmarks.gpu_check`): headloc's own evaluator, lm-eval
inside, on the random models of :mod:`headloc.benchmarks.gpu_throughput`, one mask a pass against 8
masks a pass and ``batch_size: auto``. Skipped where lm-eval is not installed.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from headloc.benchmarks.gpu_scores import Report, synchronize
from headloc.benchmarks.gpu_throughput import random_model
from headloc.heads import HeadGeometry
from headloc.search.masks import stratified_masks


def engine_section(report: Report, device: str, tokenizer_dir: Path, quick: bool, dtype: str = "bfloat16") -> None:
    """Each random model scores ioi and capitals through MaskEvaluator three ways (:func:`engine_runs`)."""
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        report.say("engine", "skipped", "lm-eval is not installed")
        return
    from transformers import AutoTokenizer

    from headloc.data.datasets import build_docs, write_jsonl
    from headloc.engine.lm_eval_tasks import TaskSpec
    from headloc.engine.grouped import version_problem

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    report.say("engine", "grouped engine's version check", version_problem() or "ok")
    folder = Path(tempfile.mkdtemp())
    n_docs = 8 if quick else 64
    specs = {}
    for task, docs in (("ioi", build_docs("ioi", n_docs=n_docs, seed=1)),
                       ("capitals", build_docs("capitals")[:n_docs])):
        write_jsonl(docs, folder / f"{task}.jsonl")
        specs[task] = TaskSpec(f"headloc_{task}").with_data_file(folder / f"{task}.jsonl")
    for geometry in (["quick"] if quick else ["1B", "8B"]):
        dtype_here = torch.float32 if device == "cpu" else getattr(torch, dtype)
        model = random_model(geometry, device, dtype_here, len(tokenizer))
        masks = stratified_masks(HeadGeometry.of(model.config).total, 16, 0.05, np.random.default_rng(0))
        for task, spec in specs.items():
            engine_runs(report, model, tokenizer, spec, masks, f"{geometry} {task}", generates=task == "capitals")
        del model
        if device != "cpu":
            torch.cuda.empty_cache()


def engine_runs(report: Report, model, tokenizer, spec, masks, name: str, generates: bool) -> None:
    """One mask at a time, 8 masks per pass, and ``batch_size: auto``: masks/s and agreement."""
    from headloc.engine.evaluation import MaskEvaluator
    from headloc.engine.grouped import GroupedLM

    runs = {}
    for label, rows, per_pass in (("1 mask/pass, 64 rows", 64, 1), ("8 masks/pass, 128 rows", 128, 8),
                                  ("8 masks/pass, auto", "auto", 8)):
        evaluator = MaskEvaluator(model, tokenizer, spec, batch_size=rows, masks_per_pass=per_pass)
        assert isinstance(evaluator.lm, GroupedLM) == (per_pass > 1)
        synchronize(model.device)
        start = time.perf_counter()
        runs[label] = evaluator.evaluate_masks(masks, progress=False)
        synchronize(model.device)
        report.say("engine", f"{name}: masks/s, {label}", len(masks) / (time.perf_counter() - start),
                   f"rows kept {evaluator.budget.rows}, {evaluator.budget.halvings} halvings")
    base = runs["1 mask/pass, 64 rows"]
    for label in ("8 masks/pass, 128 rows", "8 masks/pass, auto"):
        other = runs[label]
        scores = float(np.abs(np.array([r.score for r in base]) - [r.score for r in other]).max())
        note = ""
        if generates:
            same = np.mean([a["response"] == b["response"] for ra, rb in zip(base, other)
                            for a, b in zip(ra.samples, rb.samples)])
            note = f"identical generations {100 * same:.1f} %"
        report.say("engine", f"{name}: max |score diff| vs 1/pass, {label}", scores, note)
