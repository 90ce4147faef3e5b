"""Masked-evaluation throughput: the paper's released procedure against headloc's engine
(benchmarks/throughput.py).

It times, in one run on one machine, the same masks on the same documents three ways:

(a) released  the procedure of the paper's code (locuslab/llm-components, compressed_sensing.py:
              ``evaluate_with_mask`` -> ``reset_model`` + ``apply_head_mask`` + ``lmeval_evaluate``):
              for every mask a fresh ``HFLM(pretrained=<folder>, batch_size=1)`` loads the model
              from disk, the mask's heads are zeroed (:func:`zero_heads`), a fresh ``TaskManager()``
              (lm-eval's default task index plus headloc's tasks) is built and ``simple_evaluate``
              scores the task;
(b) headloc   one model load, masks one after another (``masks_per_pass=1``);
(c) headloc   one model load, ``masks_per_pass`` masks sharing every forward pass.

It checks that the three give the same per-mask scores (:mod:`headloc.engine.throughput_report`),
counts the token positions each one pushes through the model (:class:`TokenCounter`: prompt,
padding and every decoding step), and compares tokens/second with a ceiling from the machine's
measured matrix-multiply throughput on the model's own layer shapes (:func:`matmul_ceiling`).
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from headloc.engine.throughput_report import report_lines, summarise

TASKS = {"ioi": "headloc_ioi", "capitals": "headloc_capitals", "induction": "headloc_induction"}
CAPITALS_DOCS = 107  # the capitals task's whole dataset


@dataclass(frozen=True)
class Settings:
    """One throughput run: ``masks`` and ``docs`` per task; (b) scores ``batch_size`` documents per
    pass, (c) ``masks_per_pass`` masks in ``rows_per_pass`` rows (document x mask) per pass."""

    masks: int = 16
    docs: int = 32
    masks_per_pass: int = 8
    batch_size: int = 16
    rows_per_pass: int = 128
    tasks: tuple = ("ioi", "capitals")
    sparsity: float = 0.05  # of the cs_stratified masks
    seed: int = 0  # of the masks and the documents
    released: bool = True  # run (a), the slow one

    def __post_init__(self):
        for name in ("masks", "docs", "masks_per_pass", "batch_size", "rows_per_pass"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rows_per_pass < self.masks_per_pass:
            raise ValueError(f"rows_per_pass {self.rows_per_pass} cannot hold masks_per_pass {self.masks_per_pass} masks")
        if not 0 < self.sparsity < 1:
            raise ValueError(f"sparsity must be between 0 and 1, got {self.sparsity}")
        unknown = sorted(set(self.tasks) - set(TASKS))
        if unknown:
            raise ValueError(f"unknown tasks {unknown}; expected some of {sorted(TASKS)}")
        if self.docs > CAPITALS_DOCS and "capitals" in self.tasks:
            raise ValueError(f"docs {self.docs}: the capitals task has {CAPITALS_DOCS} documents")


class TokenCounter:
    """Token positions through a model's embedding layer (batch x sequence of every call)."""

    def __init__(self):
        self.tokens = 0

    def attach(self, model):
        def hook(module, args):
            self.tokens += int(args[0].numel())
        return model.get_input_embeddings().register_forward_pre_hook(hook)


def zero_heads(model, mask) -> None:
    """The released code's ablation, as weights: the heads' input columns of o_proj set to zero."""
    from headloc.model.ablation import HeadGeometry, hook_module_path

    n_heads = HeadGeometry.of(model.config).n_heads
    with torch.no_grad():
        for index in np.flatnonzero(mask):
            layer, head = divmod(int(index), n_heads)
            weight = model.get_submodule(hook_module_path(model, layer)).weight
            width = weight.shape[1] // n_heads
            weight[:, head * width:(head + 1) * width] = 0


def write_docs(task: str, n_docs: int, seed: int, folder: Path) -> Path:
    """The task's first ``n_docs`` documents (capitals: its fixed list; else generated with ``seed``)."""
    from headloc.data.datasets import build_docs, write_jsonl

    docs = build_docs("capitals")[:n_docs] if task == "capitals" else build_docs(task, n_docs=n_docs, seed=seed)
    path = folder / f"{task}.jsonl"
    write_jsonl(docs, path)
    return path


def run_released(location: Path, spec, masks, counter: TokenCounter) -> list[dict]:
    """(a): per mask, load from disk, zero heads, fresh TaskManager, simple_evaluate, batch size 1."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from headloc.data import TASKS_DIR
    from headloc.engine.evaluation import compact_sample

    out = []
    for mask in masks:
        lm = HFLM(pretrained=str(location), batch_size=1, device="cpu", dtype="float32")
        zero_heads(lm.model, mask)
        handle = counter.attach(lm.model)
        # the released code: TaskManager(); the data file reaches the task as lm-eval metadata
        manager = TaskManager(include_path=[str(TASKS_DIR)], metadata=dict(spec.dataset_kwargs))
        result = simple_evaluate(model=lm, tasks=[spec.lm_eval_task], task_manager=manager, verbosity="ERROR")
        handle.remove()
        name = spec.lm_eval_task
        out.append({"score": float(result["results"][name][spec.metric_key]),
                    "samples": [compact_sample(s, spec.metric) for s in result["samples"][name]]})
        del lm, result
    return out


def run_headloc(location: Path, spec, masks, counter: TokenCounter, *, batch_size, masks_per_pass):
    """(b) and (c): one load, then evaluate_masks; returns (results, setup seconds)."""
    from headloc.engine.evaluation import load_evaluator

    start = time.perf_counter()
    evaluator = load_evaluator(str(location), spec, batch_size=batch_size, masks_per_pass=masks_per_pass)
    setup = time.perf_counter() - start
    handle = counter.attach(evaluator.lm.model)
    try:
        results = evaluator.evaluate_masks(masks, progress=False)
    finally:
        handle.remove()
    return [{"score": r.score, "samples": r.samples} for r in results], setup


def linear_shapes(config) -> list[tuple[int, int]]:
    """The (in, out) shape of every linear layer one token passes: each layer's q, k, v, o, gate, up
    and down projections, then the LM head."""
    h, inter, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    kv = config.num_key_value_heads * head_dim
    layer = [(h, h), (h, kv), (h, kv), (h, h), (h, inter), (h, inter), (inter, h)]
    return [*layer * config.num_hidden_layers, (h, vocab)]


def matmul_ceiling(config, rows: int, repeats: int = 5) -> dict:
    """Time the model's linear layers alone (x @ W for every weight of one forward pass).

    ``rows`` token positions go through every :func:`linear_shapes` layer in float32; the best of
    ``repeats`` gives the tokens/second the model cannot beat on this machine, and the GFLOP/s
    behind it.
    """
    shapes = linear_shapes(config)
    weights = {shape: torch.randn(*shape) / shape[0] ** 0.5 for shape in set(shapes)}
    inputs = {n: torch.randn(rows, n) for n in {s[0] for s in shapes}}
    flops = sum(2 * rows * a * b for a, b in shapes)
    for shape in weights:  # warm-up
        torch.matmul(inputs[shape[0]], weights[shape])
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for shape in shapes:
            torch.matmul(inputs[shape[0]], weights[shape])
        best = min(best, time.perf_counter() - start)
    return {"rows": rows, "gflops": flops / best / 1e9, "tokens_per_s": rows / best, "flops_per_token": flops / rows}



def measure(location: Path, masks: np.ndarray, settings: Settings, folder: Path, log=print) -> dict:
    """Every variant of every task timed on ``masks`` (documents written under ``folder``):
    ``{task: {key: {label, seconds, setup, tokens, results}}}``."""
    from headloc.engine.lm_eval_tasks import TaskSpec

    timed = {}
    for task in settings.tasks:
        spec = TaskSpec(TASKS[task]).with_data_file(write_docs(task, settings.docs, settings.seed, folder))
        runs = {"b": (f"(b) headloc: 1 load, masks in turn, batch {settings.batch_size}", 1, settings.batch_size),
                "c": (f"(c) headloc: 1 load, {settings.masks_per_pass} masks/pass, {settings.rows_per_pass} rows/pass",
                      settings.masks_per_pass, settings.rows_per_pass)}
        variants = {}
        for key in (["a"] if settings.released else []) + list(runs):
            counter, start = TokenCounter(), time.perf_counter()
            if key == "a":
                label, results, setup = ("(a) released: load + fresh lm-eval per mask, batch 1",
                                         run_released(location, spec, masks, counter), 0.0)
            else:
                label, per_pass, rows = runs[key]
                results, setup = run_headloc(location, spec, masks, counter, batch_size=rows, masks_per_pass=per_pass)
            variants[key] = {"label": label, "seconds": time.perf_counter() - start, "setup": setup,
                             "tokens": counter.tokens, "results": results}
            log(f"  {task} ({key}) done in {variants[key]['seconds']:.1f} s")
        timed[task] = variants
    return timed



def run(location: Path, masks: np.ndarray, settings: Settings, log=print) -> tuple[dict, bool]:
    """The whole benchmark on the checkpoint at ``location`` (``masks``: ``settings.masks``
    cs_stratified masks); logs its figures and returns them (per-mask scores in place of the
    results) with whether every variant gave the same results."""
    import tempfile

    from transformers import AutoModelForCausalLM

    from headloc.model.loading import load_config

    config = load_config(str(location))
    with torch.device("meta"):  # shapes only, no weights
        n_params = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    load_before = os.getloadavg()[0]
    ceiling = matmul_ceiling(config, rows=512)
    for line in machine_lines(location, config, settings, ceiling, n_params, load_before):
        log(line)
    with tempfile.TemporaryDirectory() as tmp:
        timed = measure(location, masks, settings, Path(tmp), log)
    all_same = summarise(timed, len(masks), ceiling)
    for line in report_lines(timed, all_same):
        log(line)
    log(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
        "(other processes share these CPUs when it is above 0)")
    for variants in timed.values():
        for v in variants.values():
            v["scores"] = [r["score"] for r in v.pop("results")]
    return {"model": str(location), "params": n_params, "masks": settings.masks, "docs": settings.docs,
            "batch_size": settings.batch_size, "masks_per_pass": settings.masks_per_pass,
            "rows_per_pass": settings.rows_per_pass, "threads": torch.get_num_threads(), "ceiling": ceiling,
            "tasks": timed}, all_same


def machine_lines(location: Path, config, settings: Settings, ceiling: dict, n_params: int, load: float) -> list[str]:
    """What the run ran on: the machine (``load``: its load average before), the model and the ceiling."""
    from headloc.heads import HeadGeometry

    geometry = HeadGeometry.of(config)
    return [f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"with {torch.get_num_threads()} threads; load average {load:.2f} before the run",
            f"model: {location} ({n_params / 1e6:.1f}M parameters, {geometry.n_layers} layers x {geometry.n_heads} "
            f"heads); {settings.masks} cs_stratified masks (sparsity {settings.sparsity}, seed {settings.seed}), "
            f"{settings.docs} documents per task",
            f"matmul ceiling: {ceiling['gflops']:.1f} GFLOP/s on the model's layer shapes ({ceiling['rows']} rows) = "
            f"{ceiling['tokens_per_s']:.0f} tokens/s ({ceiling['flops_per_token'] / 1e6:.0f} MFLOP/token of linear "
            f"layers; 2 x params = {2 * n_params / 1e6:.0f} MFLOP/token)"]
