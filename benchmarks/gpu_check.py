"""The GPU check: headloc's ablation engine on a real accelerator, in one short run (at most ~8 min).

Needs torch, transformers, accelerate, numpy and scikit-learn only (no lm-eval, no Snakemake, no
network, no model files): every model is built on the spot. It imports headloc from the checkout's
src/ and runs, in order:

1. **planted**: a small Llama trained here (a few seconds on a GPU) so that one head alone copies
   the first token to the last position (the recipe of tests/planted.py); the search's score is the
   gold token's mean log-probability over the documents, many masks sharing each forward pass (one
   gate row per batch row, as the engine does). Checks: ablating the planted head destroys the
   task, the single-head ranking puts it first.
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
7. **engine** (only where lm-eval is installed, e.g. carried as wheels, and ``--tokenizer`` names a
   tokenizer folder): headloc's own evaluator (:class:`headloc.engine.evaluation.MaskEvaluator`,
   lm-eval inside) on the same random 1B and 8B models in bfloat16, ioi (log-likelihood) and
   capitals (generation): one mask at a time, 8 masks sharing each pass, and ``batch_size: auto``;
   their agreement and masks per second.

    python benchmarks/gpu_check.py --json gpu_check.json        # on the GPU machine
    python benchmarks/gpu_check.py --quick --device cpu         # a smoke run of the same code here
    python benchmarks/gpu_check.py --skip planted throughput slot --tokenizer DIR   # the engine only

Prints one line per figure; exits 1 if a check fails. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's progress bars would bury the figures

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from headloc.engine.backoff import RowBudget  # noqa: E402
from headloc.groundtruth.copy_head import plant_copy_head  # noqa: E402
from headloc.model.ablation import ablate_heads, masks_to_gate  # noqa: E402
from headloc.model.memory import Pass, Shape, estimate  # noqa: E402
from headloc.heads import HeadGeometry, format_head  # noqa: E402
from headloc.search.masks import single_head_masks, stratified_masks  # noqa: E402

# Llama-3.2-1B and Llama-3.1-8B (their config.json), weights random: the cost does not depend on them.
GEOMETRIES = {
    "1B": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "8B": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    "quick": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=False),
}
PLANTED_SHAPE = dict(vocab=64, length=12, layers=4, heads=8, hidden=128, planted=(2, 5), noise=0.1)
FIGURES: dict = {}
FAILED: list[str] = []


def say(section: str, name: str, value, note: str = "") -> None:
    FIGURES.setdefault(section, {})[name] = value
    shown = f"{value:.4g}" if isinstance(value, float) else value
    print(f"{section:<11} {name:<38} {shown}{'  ' + note if note else ''}", flush=True)


def check(section: str, name: str, ok: bool, detail: str) -> None:
    say(section, name, "ok" if ok else "FAILED", detail)
    if not ok:
        FAILED.append(f"{section}: {name} ({detail})")


def synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


# --------------------------------------------------------------------------- the engine's core


def score_masks(model, rows: torch.Tensor, gold: torch.Tensor, masks: np.ndarray, *, masks_per_pass: int,
                rows_per_pass: int, keep_all: bool = False) -> np.ndarray:
    """Mean gold log-probability at the last position per mask: ``masks_per_pass`` masks share each
    pass, each document repeated once per mask, ``rows_per_pass`` rows at most (as the engine)."""
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


def planted_model(device: str, steps: int, seed: int = 0) -> LlamaForCausalLM:
    """A Llama whose head ``planted`` alone moves the first token to the last position."""
    p = PLANTED_SHAPE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=p["vocab"], hidden_size=p["hidden"], intermediate_size=2 * p["hidden"],
                         num_hidden_layers=p["layers"], num_attention_heads=p["heads"],
                         num_key_value_heads=p["heads"], max_position_embeddings=64, bos_token_id=1,
                         eos_token_id=2, pad_token_id=0)
    return plant_copy_head(LlamaForCausalLM(config).to(device), p["planted"], steps=steps, rows=256,
                           length=p["length"], first_token=3, lr=3e-3, noise=p["noise"], seed=seed)


def planted_section(device: str, quick: bool) -> None:
    p = PLANTED_SHAPE
    start = time.perf_counter()
    model = planted_model(device, steps=60 if quick else 400)
    synchronize(device)
    say("planted", "training seconds", time.perf_counter() - start)
    generator = torch.Generator().manual_seed(1)
    rows = torch.randint(3, p["vocab"], (64, p["length"]), generator=generator)
    gold = rows[:, 0].clone()
    n = p["layers"] * p["heads"]
    singles = single_head_masks(n)
    random = stratified_masks(n, 16, 0.1, np.random.default_rng(0))
    masks = np.vstack([singles, random])  # row 0 unablated, then one row per head
    fp32 = score_masks(model, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    planted = p["planted"][0] * p["heads"] + p["planted"][1]
    effects = fp32[1:n + 1] - fp32[0]
    say("planted", "score unablated (mean log p)", float(fp32[0]))
    say("planted", "score, planted head ablated", float(fp32[1 + planted]), f"chance: {-np.log(p['vocab'] - 3):.3f}")
    check("planted", "top single-head effect is planted", int(np.argmin(effects)) == planted,
          f"top {format_head(*divmod(int(np.argmin(effects)), p['heads']))}, planted {format_head(*p['planted'])}")
    one_at_a_time = score_masks(model, rows, gold, masks, masks_per_pass=1, rows_per_pass=64)
    difference = float(np.abs(one_at_a_time - fp32).max())
    check("planted", "8 masks/pass == 1 mask/pass", difference < 1e-4, f"max |diff| {difference:.2e}")
    bf16_section(model, rows, gold, masks, fp32, n, planted)
    if torch.device(device).type == "cuda":
        device_map_section(model, rows, gold, masks, fp32)


def bf16_section(model, rows, gold, masks, fp32, n, planted) -> None:
    from scipy.stats import spearmanr

    bf16_model = LlamaForCausalLM(model.config).to(model.device)
    bf16_model.load_state_dict(model.state_dict())
    bf16_model.to(torch.bfloat16).eval()
    bf16 = score_masks(bf16_model, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    effects32, effects16 = fp32[1:n + 1] - fp32[0], bf16[1:n + 1] - bf16[0]
    say("bf16", "max |score bf16 - fp32| (nats)", float(np.abs(bf16 - fp32).max()))
    say("bf16", "max |score| relative difference", float((np.abs(bf16 - fp32) / np.abs(fp32)).max()))
    say("bf16", "spearman of single-head effects", float(spearmanr(effects32, effects16).statistic))
    top32, top16 = np.argsort(effects32)[:5], np.argsort(effects16)[:5]
    say("bf16", "top-5 overlap (of 5)", len(set(top32) & set(top16)))
    check("bf16", "top head agrees", int(top16[0]) == int(top32[0]) == planted, f"bf16 top {int(top16[0])}")
    random32, random16 = fp32[n + 1:], bf16[n + 1:]
    say("bf16", "spearman of the 16 masks' scores", float(spearmanr(random32, random16).statistic))


def device_map_section(model, rows, gold, masks, fp32) -> None:
    from accelerate import dispatch_model

    split = LlamaForCausalLM(model.config)
    split.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    layers = model.config.num_hidden_layers
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.norm": "cpu", "lm_head": "cpu",
                  **{f"model.layers.{i}": (0 if i < layers // 2 else "cpu") for i in range(layers)}}
    split = dispatch_model(split.eval(), device_map=device_map)
    scores = score_masks(split, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    difference = float(np.abs(scores - fp32).max())
    check("device_map", "GPU+CPU split == one GPU", difference < 1e-4,
          f"layers 0-{layers // 2 - 1} on cuda:0, the rest on cpu; max |diff| {difference:.2e}")


# --------------------------------------------------------------------------- 4-5: throughput, back-off


def random_model(geometry: str, device: str, dtype=torch.bfloat16) -> LlamaForCausalLM:
    config = LlamaConfig(**GEOMETRIES[geometry], max_position_embeddings=4096)
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


def throughput_section(device: str, quick: bool) -> None:
    peak = matmul_rate(device, quick)
    say("throughput", "matmul TFLOP/s (bf16)", peak / 1e12)
    context, docs = (32, 16) if quick else (256, 64)
    for geometry in (["quick"] if quick else ["1B", "8B"]):
        start = time.perf_counter()
        model = random_model(geometry, device, torch.float32 if device == "cpu" else torch.bfloat16)
        synchronize(device)
        shape = Shape.of(model.config.to_dict())
        say("throughput", f"{geometry}: build seconds", time.perf_counter() - start,
            f"{shape.parameters / 1e9:.2f}B parameters, {shape.layers}x{shape.heads} heads")
        n = shape.layers * shape.heads
        generator = torch.Generator().manual_seed(0)
        rows = torch.randint(0, shape.vocab, (docs, context), generator=generator)
        gold = torch.randint(0, shape.vocab, (docs,), generator=generator)
        masks = stratified_masks(n, 32, 0.05, np.random.default_rng(0))
        flops_per_token = 2 * shape.parameters
        for per_pass, rows_per_pass in ((1, 64), (8, 128), (32, 256)):
            score_masks(model, rows, gold, masks[:per_pass], masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
            if device != "cpu":
                torch.cuda.reset_peak_memory_stats()
            synchronize(device)
            start = time.perf_counter()
            score_masks(model, rows, gold, masks, masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
            synchronize(device)
            seconds = time.perf_counter() - start
            tokens = len(masks) * docs * context
            note = f"{tokens / seconds:,.0f} tokens/s, {100 * tokens * flops_per_token / seconds / peak:.0f}% of matmul"
            say("throughput", f"{geometry}: masks/s, {per_pass} per pass, {rows_per_pass} rows", len(masks) / seconds, note)
            if device != "cpu":
                measured = torch.cuda.max_memory_allocated()
                planned = estimate(shape, "bfloat16", Pass(rows_per_pass, context, kept=1)).total
                say("throughput", f"{geometry}: peak GiB measured / estimated", round(measured / 2**30, 2),
                    f"estimate {planned / 2**30:.2f} GiB")
        if geometry == "8B" or quick:
            backoff_section(model, shape, device, quick)
        del model
        if device != "cpu":
            torch.cuda.empty_cache()


def backoff_section(model, shape: Shape, device: str, quick: bool) -> None:
    """A pass far too large: every position's logits at 2,048 tokens (8B: ~0.5 GiB a row)."""
    context, docs = (64, 8) if quick else (2048, 128)
    start_rows = 2 * docs  # the whole work in one pass: 256 rows x 2,048 tokens x 128,256 logits on 8B
    generator = torch.Generator().manual_seed(1)
    rows = torch.randint(0, shape.vocab, (docs, context), generator=generator)
    gold = torch.randint(0, shape.vocab, (docs,), generator=generator)
    masks = stratified_masks(shape.layers * shape.heads, 2, 0.05, np.random.default_rng(1))
    budget = RowBudget(start_rows)
    start = time.perf_counter()

    def step(rows_per_pass):
        return score_masks(model, rows, gold, masks, masks_per_pass=2, rows_per_pass=rows_per_pass,
                           keep_all=True)

    backed = budget.run(step)
    seconds = time.perf_counter() - start
    say("backoff", "start rows -> working rows", f"{start_rows} -> {budget.rows}",
        f"{budget.halvings} halvings, {seconds:.1f} s")
    direct = score_masks(model, rows, gold, masks, masks_per_pass=2, rows_per_pass=budget.rows, keep_all=True)
    check("backoff", "scores == a run at the working size", bool(np.array_equal(backed, direct)),
          f"max |diff| {float(np.abs(backed - direct).max()):.2e}")
    if device != "cpu":
        check("backoff", "ran out of memory at the start", budget.halvings > 0, f"{budget.halvings} halvings")
        free = torch.cuda.mem_get_info()[0] + torch.cuda.memory_allocated() - shape.parameters * 2
        per_row = estimate(shape, "bfloat16", Pass(1, context)).total - shape.parameters * 2
        say("backoff", "rows the estimate fits / working rows", f"{int(free // per_row)} / {budget.rows}")


# --------------------------------------------------------------------------- 6: GPU slots

# an evaluating job's start, as the workflow's scripts make it (the claim's return value dropped);
# it holds its GPU until the file `release` appears
CLAIM = """
import os, sys, time, torch
sys.path.insert(0, {src!r})
from headloc.workflow.jobs import start_evaluating_job
start_evaluating_job({log!r}, 1, spread=False)
print("claimed", os.environ.get("CUDA_VISIBLE_DEVICES"), "sees", torch.cuda.device_count(), time.time(), flush=True)
while not os.path.exists({release!r}):
    time.sleep(0.1)
print("released", time.time(), flush=True)
"""
WAIT_SECONDS = 120  # the longest a job's start-up may take here


def claimant(env: dict, folder: Path, name: str) -> subprocess.Popen:
    script = CLAIM.format(src=str(REPO / "src"), log=str(folder / f"{name}.log"), release=str(folder / "release"))
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)


def slot_section() -> None:
    """One job per visible GPU, each started as the scripts start: every job sees one GPU and no
    two share one; one job more waits (its log says so) until the first jobs let go."""
    import tempfile

    from headloc.model.gpus import visible_gpus

    folder = Path(tempfile.mkdtemp())
    env = {**os.environ, "HEADLOC_GPU_LOCKS": str(folder / "locks")}
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
    say("gpu slot", "visible GPUs", ",".join(gpus))
    say("gpu slot", "jobs' GPUs (devices each sees)", " ".join(f"{line[1]} ({line[3]})" for line in claimed))
    distinct = sorted(line[1] for line in claimed) == sorted(gpus) and all(line[3] == "1" for line in claimed)
    check("gpu slot", "one GPU each, all of them, none shared", distinct, f"{len(gpus)} jobs on {len(gpus)} GPUs")
    after = float(late[4]) - min(released) if late else float("nan")
    check("gpu slot", "one job more waited for a free GPU", waited and after >= 0 and late[1] in gpus,
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


def engine_section(device: str, tokenizer_dir: Path, quick: bool, dtype: str = "bfloat16") -> None:
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        say("engine", "skipped", "lm-eval is not installed")
        return
    import tempfile

    from transformers import AutoTokenizer

    from headloc.data.datasets import build_docs, write_jsonl
    from headloc.engine.evaluation import MaskEvaluator, TaskSpec
    from headloc.engine.grouped import GroupedLM, version_problem

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    say("engine", "grouped engine's version check", version_problem() or "ok")
    folder = Path(tempfile.mkdtemp())
    n_docs = 8 if quick else 64
    specs = {}
    for task, docs in (("ioi", build_docs("ioi", n_docs=n_docs, seed=1)), ("capitals", build_docs("capitals")[:n_docs])):
        write_jsonl(docs, folder / f"{task}.jsonl")
        specs[task] = TaskSpec(f"headloc_{task}").with_data_file(folder / f"{task}.jsonl")
    dtype = torch.float32 if device == "cpu" else getattr(torch, dtype)
    for geometry in (["quick"] if quick else ["1B", "8B"]):
        GEOMETRIES[geometry]["vocab_size"] = max(GEOMETRIES[geometry]["vocab_size"], len(tokenizer))
        model = random_model(geometry, device, dtype)
        n = model.config.num_hidden_layers * model.config.num_attention_heads
        masks = stratified_masks(n, 16, 0.05, np.random.default_rng(0))
        for task, spec in specs.items():
            runs = {}
            for label, rows, per_pass in (("1 mask/pass, 64 rows", 64, 1), ("8 masks/pass, 128 rows", 128, 8),
                                          ("8 masks/pass, auto", "auto", 8)):
                evaluator = MaskEvaluator(model, tokenizer, spec, batch_size=rows, masks_per_pass=per_pass)
                assert isinstance(evaluator.lm, GroupedLM) == (per_pass > 1)
                synchronize(device)
                start = time.perf_counter()
                results = evaluator.evaluate_masks(masks, progress=False)
                synchronize(device)
                runs[label] = results
                say("engine", f"{geometry} {task}: masks/s, {label}", len(masks) / (time.perf_counter() - start),
                    f"rows kept {evaluator.budget.rows}, {evaluator.budget.halvings} halvings")
            base = runs["1 mask/pass, 64 rows"]
            for label in ("8 masks/pass, 128 rows", "8 masks/pass, auto"):
                other = runs[label]
                scores = float(np.abs(np.array([r.score for r in base]) - [r.score for r in other]).max())
                same = np.mean([a["response"] == b["response"] for ra, rb in zip(base, other)
                                for a, b in zip(ra.samples, rb.samples)]) if task == "capitals" else None
                note = f"; identical generations {100 * same:.1f} %" if same is not None else ""
                say("engine", f"{geometry} {task}: max |score diff| vs 1/pass, {label}", scores, note.lstrip("; "))
        del model
        if device != "cpu":
            torch.cuda.empty_cache()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="small shapes only: a smoke run of the code")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument("--skip", nargs="*", default=[], choices=["planted", "throughput", "slot", "engine"])
    parser.add_argument("--tokenizer", type=Path, help="a tokenizer folder for the engine section (SmolLM2's)")
    parser.add_argument("--engine-dtype", default="bfloat16", choices=["bfloat16", "float32"],
                        help="the engine section's dtype on a GPU (default bfloat16)")
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    say("machine", "device", name)
    say("machine", "torch / transformers", f"{torch.__version__} / {transformers.__version__}")
    if args.device.startswith("cuda"):
        say("machine", "GPU memory GiB", round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))
    start = time.perf_counter()
    if "planted" not in args.skip:
        planted_section(args.device, args.quick)
    if "throughput" not in args.skip:
        throughput_section(args.device, args.quick)
    if "slot" not in args.skip and args.device.startswith("cuda"):
        slot_section()
    if "engine" not in args.skip and args.tokenizer:
        engine_section(args.device, args.tokenizer, args.quick, args.engine_dtype)
    say("machine", "seconds in all", time.perf_counter() - start)
    if args.json:
        args.json.write_text(json.dumps({"figures": FIGURES, "failed": FAILED}, indent=2, default=str))
    print("FAILED: " + "; ".join(FAILED) if FAILED else "every check passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
