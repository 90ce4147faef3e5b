"""The GPU check: headloc's ablation engine on a real accelerator, in one short run (at most ~8 min;
benchmarks/gpu_check.py runs it).

Needs torch, transformers, accelerate, numpy, scipy and scikit-learn only (no lm-eval, no
Snakemake, no network, no model files): every model is built on the spot. :func:`run_checks` runs,
in order:

1. **planted**: a small Llama trained here (a few seconds on a GPU) so that one head alone copies
   the first token to the last position (:func:`headloc.groundtruth.copy_head.plant_copy_head`);
   the search's score is the gold token's mean log-probability over the documents, many masks
   sharing each forward pass (one gate row per batch row, as the engine does: :func:`gold_scores`).
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
to a :class:`Report`; a check that fails is listed in ``Report.failed``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from headloc.heads import HeadGeometry, format_head
from headloc.model.ablation import ablate_heads, masks_to_gate
from headloc.search.masks import single_head_masks, stratified_masks

# Llama-3.2-1B and Llama-3.1-8B (their config.json), weights random: the cost does not depend on them.
GEOMETRIES = {
    "1B": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "8B": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    "quick": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=False),
}
SECTIONS = ("planted", "throughput", "slot", "engine")


@dataclass(frozen=True)
class Planted:
    """A planted copy task: ``planted`` (layer, head) alone moves a row's first token (drawn from
    ``first_token`` up to ``vocab``) to the row's end, ``length`` tokens."""

    vocab: int = 64
    length: int = 12
    layers: int = 4
    heads: int = 8
    hidden: int = 128
    planted: tuple = (2, 5)
    first_token: int = 3
    noise: float = 0.1

    def rows(self, n: int = 64, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` rows of the task and their gold tokens (each row's first)."""
        rows = torch.randint(self.first_token, self.vocab, (n, self.length), generator=torch.Generator().manual_seed(seed))
        return rows, rows[:, 0].clone()


@dataclass
class Report:
    """Every figure by section and name, and the checks that failed; each line is logged as it comes."""

    figures: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    log: object = print

    def say(self, section: str, name: str, value, note: str = "") -> None:
        self.figures.setdefault(section, {})[name] = value
        shown = f"{value:.4g}" if isinstance(value, float) else value
        self.log(f"{section:<11} {name:<38} {shown}{'  ' + note if note else ''}")

    def check(self, section: str, name: str, ok: bool, detail: str) -> None:
        self.say(section, name, "ok" if ok else "FAILED", detail)
        if not ok:
            self.failed.append(f"{section}: {name} ({detail})")


def synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def gold_scores(model, rows: torch.Tensor, gold: torch.Tensor, masks: np.ndarray, *, masks_per_pass: int,
                rows_per_pass: int, keep_all: bool = False) -> np.ndarray:
    """Mean gold log-probability at the last position per mask (1 = ablated): ``masks_per_pass``
    masks share each pass, each document repeated once per mask, ``rows_per_pass`` rows at most (as
    the engine); ``keep_all`` keeps every position's logits (the memory of a generation pass)."""
    geometry = HeadGeometry.of(model.config)
    device = model.get_input_embeddings().weight.device
    docs_per_pass = max(1, rows_per_pass // masks_per_pass)
    totals = np.zeros(len(masks))
    for start in range(0, len(masks), masks_per_pass):
        group = masks[start:start + masks_per_pass]
        gate = masks_to_gate(group, geometry)
        for first in range(0, len(rows), docs_per_pass):
            docs = rows[first:first + docs_per_pass].to(device)
            batch = docs.repeat_interleave(len(group), dim=0)
            with torch.no_grad(), ablate_heads(model, gate.repeat(len(docs), 1, 1)):
                logits = model(batch, logits_to_keep=0 if keep_all else 1, use_cache=False).logits[:, -1]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            target = gold[first:first + docs_per_pass].to(device).repeat_interleave(len(group))
            picked = logprobs.gather(1, target[:, None]).view(len(docs), len(group))
            totals[start:start + len(group)] += picked.sum(0).double().cpu().numpy()
    return totals / len(rows)


# --------------------------------------------------------------------------- 1-3: the planted model


def planted_model(task: Planted, device: str, steps: int, seed: int = 0):
    """A Llama whose head ``task.planted`` alone moves the first token to the last position."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from headloc.groundtruth.copy_head import plant_copy_head

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=task.vocab, hidden_size=task.hidden, intermediate_size=2 * task.hidden,
                         num_hidden_layers=task.layers, num_attention_heads=task.heads,
                         num_key_value_heads=task.heads, max_position_embeddings=64, bos_token_id=1,
                         eos_token_id=2, pad_token_id=0)
    return plant_copy_head(LlamaForCausalLM(config).to(device), task.planted, steps=steps, rows=256,
                           length=task.length, first_token=task.first_token, lr=3e-3, noise=task.noise, seed=seed)


def planted_section(report: Report, device: str, quick: bool) -> None:
    """Train the planted model, then :func:`planted_checks` it."""
    task = Planted()
    start = time.perf_counter()
    model = planted_model(task, device, steps=60 if quick else 400)
    synchronize(device)
    report.say("planted", "training seconds", time.perf_counter() - start)
    planted_checks(report, model, task)


def planted_checks(report: Report, model, task: Planted) -> None:
    """The planted head found first; 8 masks per pass score as 1; then bf16 (and, on a GPU, a
    model split over GPU and CPU) against these float32 scores."""
    rows, gold = task.rows()
    n = HeadGeometry.of(model.config).total
    masks = np.vstack([single_head_masks(n), stratified_masks(n, 16, 0.1, np.random.default_rng(0))])
    fp32 = gold_scores(model, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)  # row 0 unablated, then 1 per head
    planted = task.planted[0] * task.heads + task.planted[1]
    effects = fp32[1:n + 1] - fp32[0]
    report.say("planted", "score unablated (mean log p)", float(fp32[0]))
    report.say("planted", "score, planted head ablated", float(fp32[1 + planted]),
               f"chance: {-np.log(task.vocab - task.first_token):.3f}")
    top = int(np.argmin(effects))
    report.check("planted", "top single-head effect is planted", top == planted,
                 f"top {format_head(*divmod(top, task.heads))}, planted {format_head(*task.planted)}")
    one_at_a_time = gold_scores(model, rows, gold, masks, masks_per_pass=1, rows_per_pass=64)
    difference = float(np.abs(one_at_a_time - fp32).max())
    report.check("planted", "8 masks/pass == 1 mask/pass", difference < 1e-4, f"max |diff| {difference:.2e}")
    bf16_section(report, model, rows, gold, masks, fp32, planted)
    if model.device.type == "cuda":
        device_map_section(report, model, rows, gold, masks, fp32)


def bf16_section(report: Report, model, rows, gold, masks, fp32, planted: int) -> None:
    from scipy.stats import spearmanr

    n = HeadGeometry.of(model.config).total
    bf16_model = type(model)(model.config).to(model.device)
    bf16_model.load_state_dict(model.state_dict())
    bf16_model.to(torch.bfloat16).eval()
    bf16 = gold_scores(bf16_model, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    effects32, effects16 = fp32[1:n + 1] - fp32[0], bf16[1:n + 1] - bf16[0]
    report.say("bf16", "max |score bf16 - fp32| (nats)", float(np.abs(bf16 - fp32).max()))
    report.say("bf16", "max |score| relative difference", float((np.abs(bf16 - fp32) / np.abs(fp32)).max()))
    report.say("bf16", "spearman of single-head effects", float(spearmanr(effects32, effects16).statistic))
    top32, top16 = np.argsort(effects32)[:5], np.argsort(effects16)[:5]
    report.say("bf16", "top-5 overlap (of 5)", len(set(top32) & set(top16)))
    report.check("bf16", "top head agrees", int(top16[0]) == int(top32[0]) == planted, f"bf16 top {int(top16[0])}")
    report.say("bf16", "spearman of the 16 masks' scores", float(spearmanr(fp32[n + 1:], bf16[n + 1:]).statistic))


def device_map_section(report: Report, model, rows, gold, masks, fp32) -> None:
    from accelerate import dispatch_model

    split = type(model)(model.config)
    split.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    layers = model.config.num_hidden_layers
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.norm": "cpu", "lm_head": "cpu",
                  **{f"model.layers.{i}": (0 if i < layers // 2 else "cpu") for i in range(layers)}}
    split = dispatch_model(split.eval(), device_map=device_map)
    scores = gold_scores(split, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    difference = float(np.abs(scores - fp32).max())
    report.check("device_map", "GPU+CPU split == one GPU", difference < 1e-4,
                 f"layers 0-{layers // 2 - 1} on cuda:0, the rest on cpu; max |diff| {difference:.2e}")


# --------------------------------------------------------------------------- 4-5: throughput, back-off


def random_model(geometry: str, device: str, dtype=torch.bfloat16, vocab: int = 0):
    """A random-weight Llama of one of :data:`GEOMETRIES` (its vocabulary at least ``vocab``)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {**GEOMETRIES[geometry], "vocab_size": max(GEOMETRIES[geometry]["vocab_size"], vocab)}
    config = LlamaConfig(**shape, max_position_embeddings=4096)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def matmul_rate(device: str, quick: bool) -> float:
    """Measured bf16 (cpu: float32) matrix-multiply FLOP/s on an 8192-cube (quick: 1024)."""
    size = 1024 if quick else 8192
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    start, reps = time.perf_counter(), 10
    for _ in range(reps):
        a @ b
    synchronize(device)
    return 2 * size**3 * reps / (time.perf_counter() - start)


def throughput_section(report: Report, device: str, quick: bool) -> None:
    from headloc.model.memory import Shape

    peak = matmul_rate(device, quick)
    report.say("throughput", "matmul TFLOP/s (bf16)", peak / 1e12)
    for geometry in (["quick"] if quick else ["1B", "8B"]):
        start = time.perf_counter()
        model = random_model(geometry, device, torch.float32 if device == "cpu" else torch.bfloat16)
        synchronize(device)
        shape = Shape.of(model.config.to_dict())
        report.say("throughput", f"{geometry}: build seconds", time.perf_counter() - start,
                   f"{shape.parameters / 1e9:.2f}B parameters, {shape.layers}x{shape.heads} heads")
        masks_per_second(report, model, shape, device, geometry, peak, quick)
        if geometry == "8B" or quick:
            backoff_section(report, model, shape, device, quick)
        del model
        if device != "cpu":
            torch.cuda.empty_cache()


def masks_per_second(report: Report, model, shape, device: str, geometry: str, peak: float, quick: bool) -> None:
    """32 masks at 1, 8 and 32 masks per pass: masks/s, tokens/s against ``peak``, peak memory."""
    from headloc.model.memory import Pass, estimate

    context, docs = (32, 16) if quick else (256, 64)
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(0, shape.vocab, (docs, context), generator=generator)
    gold = torch.randint(0, shape.vocab, (docs,), generator=generator)
    masks = stratified_masks(shape.layers * shape.heads, 32, 0.05, np.random.default_rng(0))
    for per_pass, rows_per_pass in ((1, 64), (8, 128), (32, 256)):
        gold_scores(model, rows, gold, masks[:per_pass], masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
        if device != "cpu":
            torch.cuda.reset_peak_memory_stats()
        synchronize(device)
        start = time.perf_counter()
        gold_scores(model, rows, gold, masks, masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
        synchronize(device)
        seconds = time.perf_counter() - start
        tokens = len(masks) * docs * context
        note = f"{tokens / seconds:,.0f} tokens/s, {100 * tokens * 2 * shape.parameters / seconds / peak:.0f}% of matmul"
        report.say("throughput", f"{geometry}: masks/s, {per_pass} per pass, {rows_per_pass} rows", len(masks) / seconds,
                   note)
        if device != "cpu":
            planned = estimate(shape, "bfloat16", Pass(rows_per_pass, context, kept=1)).total
            report.say("throughput", f"{geometry}: peak GiB measured / estimated",
                       round(torch.cuda.max_memory_allocated() / 2**30, 2), f"estimate {planned / 2**30:.2f} GiB")


def backoff_section(report: Report, model, shape, device: str, quick: bool) -> None:
    """A pass far too large: every position's logits at 2,048 tokens (8B: ~0.5 GiB a row)."""
    from headloc.engine.backoff import RowBudget
    from headloc.model.memory import Pass, estimate

    context, docs = (64, 8) if quick else (2048, 128)
    start_rows = 2 * docs  # the whole work in one pass: 256 rows x 2,048 tokens x 128,256 logits on 8B
    generator = torch.Generator().manual_seed(1)
    rows = torch.randint(0, shape.vocab, (docs, context), generator=generator)
    gold = torch.randint(0, shape.vocab, (docs,), generator=generator)
    masks = stratified_masks(shape.layers * shape.heads, 2, 0.05, np.random.default_rng(1))
    budget = RowBudget(start_rows)
    start = time.perf_counter()
    backed = budget.run(lambda rows_per_pass: gold_scores(model, rows, gold, masks, masks_per_pass=2,
                                                          rows_per_pass=rows_per_pass, keep_all=True))
    report.say("backoff", "start rows -> working rows", f"{start_rows} -> {budget.rows}",
               f"{budget.halvings} halvings, {time.perf_counter() - start:.1f} s")
    direct = gold_scores(model, rows, gold, masks, masks_per_pass=2, rows_per_pass=budget.rows, keep_all=True)
    report.check("backoff", "scores == a run at the working size", bool(np.array_equal(backed, direct)),
                 f"max |diff| {float(np.abs(backed - direct).max()):.2e}")
    if device != "cpu":
        report.check("backoff", "ran out of memory at the start", budget.halvings > 0, f"{budget.halvings} halvings")
        free = torch.cuda.mem_get_info()[0] + torch.cuda.memory_allocated() - shape.parameters * 2
        per_row = estimate(shape, "bfloat16", Pass(1, context)).total - shape.parameters * 2
        report.say("backoff", "rows the estimate fits / working rows", f"{int(free // per_row)} / {budget.rows}")


# --------------------------------------------------------------------------- 6: GPU slots

# an evaluating job's start, as the workflow's scripts make it (the claim's return value dropped);
# it holds its GPU until the file `release` appears
CLAIM = """
import os, sys, time, torch
from headloc.workflow.jobs import start_evaluating_job
start_evaluating_job({log!r}, 1, spread=False)
print("claimed", os.environ.get("CUDA_VISIBLE_DEVICES"), "sees", torch.cuda.device_count(), time.time(), flush=True)
while not os.path.exists({release!r}):
    time.sleep(0.1)
print("released", time.time(), flush=True)
"""
WAIT_SECONDS = 120  # the longest a job's start-up may take here


def claimant(env: dict, folder: Path, name: str) -> subprocess.Popen:
    script = CLAIM.format(log=str(folder / f"{name}.log"), release=str(folder / "release"))
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)


def slot_section(report: Report) -> None:
    """One job per visible GPU, each started as the scripts start: every job sees one GPU and no
    two share one; one job more waits (its log says so) until the first jobs let go."""
    from headloc.model.gpus import visible_gpus

    folder = Path(tempfile.mkdtemp())
    here = str(Path(__file__).resolve().parents[2])  # the folder holding headloc: the jobs import this copy
    env = {**os.environ, "HEADLOC_GPU_LOCKS": str(folder / "locks"),
           "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    env.pop("SLURM_JOB_ID", None)  # the claim of a machine's GPUs, not Slurm's own choice
    gpus = visible_gpus(env)
    holders = [claimant(env, folder, f"job{i}") for i in range(len(gpus))]
    claimed = [holder.stdout.readline().split() for holder in holders]
    extra = claimant(env, folder, "extra")
    waited = waits_for_a_gpu(folder / "extra.log")
    (folder / "release").touch()
    released = [float(holder.stdout.readline().split()[1]) for holder in holders]
    late = extra.stdout.readline().split()
    for process in (*holders, extra):
        process.wait()
    report.say("gpu slot", "visible GPUs", ",".join(gpus))
    report.say("gpu slot", "jobs' GPUs (devices each sees)", " ".join(f"{line[1]} ({line[3]})" for line in claimed))
    distinct = sorted(line[1] for line in claimed) == sorted(gpus) and all(line[3] == "1" for line in claimed)
    report.check("gpu slot", "one GPU each, all of them, none shared", distinct, f"{len(gpus)} jobs on {len(gpus)} GPUs")
    after = float(late[4]) - min(released) if late else float("nan")
    report.check("gpu slot", "one job more waited for a free GPU", waited and after >= 0 and late[1] in gpus,
                 f"its log says it waited: {waited}; claimed {late[1:2]} {after:.1f} s after the first release")


def waits_for_a_gpu(log: Path) -> bool:
    """Whether the job logging to ``log`` says, within WAIT_SECONDS, that it waits for a GPU."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if log.is_file() and "waiting for one to be free" in log.read_text():
            return True
        time.sleep(0.2)
    return False


# --------------------------------------------------------------------------- 7: the lm-eval engine


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
    for task, docs in (("ioi", build_docs("ioi", n_docs=n_docs, seed=1)), ("capitals", build_docs("capitals")[:n_docs])):
        write_jsonl(docs, folder / f"{task}.jsonl")
        specs[task] = TaskSpec(f"headloc_{task}").with_data_file(folder / f"{task}.jsonl")
    for geometry in (["quick"] if quick else ["1B", "8B"]):
        model = random_model(geometry, device, torch.float32 if device == "cpu" else getattr(torch, dtype), len(tokenizer))
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
