"""Masked-evaluation throughput: the paper's released procedure against headloc's engine.

Times, in one run on one machine, the same masks on the same documents three ways:

(a) released  the procedure of the paper's code (locuslab/llm-components, compressed_sensing.py:
              ``evaluate_with_mask`` -> ``reset_model`` + ``apply_head_mask`` + ``lmeval_evaluate``):
              for every mask a fresh ``HFLM(pretrained=<folder>, batch_size=1)`` loads the model
              from disk, the mask's heads are zeroed, a fresh ``TaskManager()`` (lm-eval's default
              task index plus headloc's tasks) is built and ``simple_evaluate`` scores the task;
(b) headloc   one model load, masks one after another (``masks_per_pass=1``);
(c) headloc   one model load, ``--masks-per-pass`` masks sharing every forward pass.

It checks that the three give the same per-mask scores, counts the token positions each one
pushes through the model (a pre-hook on the embedding layer: prompt, padding and every decoding
step), and compares tokens/second with a ceiling from the machine's measured matrix-multiply
throughput on the model's own layer shapes. A benchmark that prints figures, not a test.

    .venv/bin/python benchmarks/throughput.py                 # 16 masks x 32 documents, ioi + capitals
    .venv/bin/python benchmarks/throughput.py --masks 4 --docs 8 --skip-released   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's progress bars would bury the table

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL_DIRS = (REPO / "results" / "models" / "smollm2-135m", REPO / "results" / "test-cache" / "smollm2-135m-instruct")
# Log-likelihoods of the same text in differently shaped batches differ by float32 rounding
# (about 1e-4 on values near -10): lm-eval's own batch 16 vs batch 1 already does.
LOGLIK_TOLERANCE = 1e-3
TASKS = {"ioi": "headloc_ioi", "capitals": "headloc_capitals", "induction": "headloc_induction"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, help="converted SmolLM2 folder (default: the workflow's "
                        "or the tests' copy; converted from the embedded GGUF when neither exists)")
    parser.add_argument("--masks", type=int, default=16, help="masks per task (default 16)")
    parser.add_argument("--docs", type=int, default=32, help="documents per task (default 32)")
    parser.add_argument("--masks-per-pass", type=int, default=8, help="masks sharing a pass in (c) (default 8)")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="documents per forward pass in (b) (default 16, headloc's default)")
    parser.add_argument("--rows-per-pass", type=int, default=128,
                        help="rows (document x mask) per forward pass in (c): its batch_size (default 128)")
    parser.add_argument("--tasks", nargs="+", default=["ioi", "capitals"], choices=sorted(TASKS),
                        help="tasks to time (default: ioi capitals)")
    parser.add_argument("--sparsity", type=float, default=0.05, help="cs_stratified sparsity (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="seed of masks and documents (default 0)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--skip-released", action="store_true", help="leave out (a), the slow one")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    for name in ("masks", "docs", "masks_per_pass", "batch_size", "rows_per_pass"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.rows_per_pass < args.masks_per_pass:
        parser.error(f"--rows-per-pass {args.rows_per_pass} cannot hold --masks-per-pass {args.masks_per_pass} masks")
    if args.docs > 107 and "capitals" in args.tasks:
        parser.error(f"--docs {args.docs}: the capitals task has 107 documents")
    return args


# --------------------------------------------------------------------------- set-up


def model_dir(requested: Path | None) -> Path:
    from headloc.model.loading import check_checkpoint_dir, convert_gguf, resolve_source

    if requested is not None:
        check_checkpoint_dir(requested)
        return requested
    for candidate in MODEL_DIRS:
        try:
            check_checkpoint_dir(candidate)
            return candidate
        except (ValueError, FileNotFoundError, OSError):
            continue
    print(f"converting the embedded SmolLM2 GGUF into {MODEL_DIRS[-1]} (once) ...", flush=True)
    return convert_gguf(resolve_source("smollm2-135m-instruct").location, str(MODEL_DIRS[-1]))


def write_docs(task: str, n_docs: int, seed: int, folder: Path) -> Path:
    from headloc.data.datasets import build_docs, write_jsonl

    docs = build_docs("capitals")[:n_docs] if task == "capitals" else build_docs(task, n_docs=n_docs, seed=seed)
    path = folder / f"{task}.jsonl"
    write_jsonl(docs, path)
    return path


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


# --------------------------------------------------------------------------- the three procedures


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
        result = simple_evaluate(model=lm, tasks=[spec.lm_eval_task], task_manager=manager,
                                 verbosity="ERROR")
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


# --------------------------------------------------------------------------- the ceiling


def matmul_ceiling(config, rows: int, repeats: int = 5) -> dict:
    """Time the model's linear layers alone (x @ W for every weight of one forward pass).

    ``rows`` token positions go through each layer's q, k, v, o, gate, up and down projections and
    through the LM head, with the model's shapes and dtype float32; the best of ``repeats``
    gives the tokens/second the model cannot beat on this machine, and the GFLOP/s behind it.
    """
    h, inter, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    kv = config.num_key_value_heads * head_dim
    layer_shapes = [(h, h), (h, kv), (h, kv), (h, h), (h, inter), (h, inter), (inter, h)]
    shapes = [*layer_shapes * config.num_hidden_layers, (h, vocab)]
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
    return {"rows": rows, "gflops": flops / best / 1e9, "tokens_per_s": rows / best,
            "flops_per_token": flops / rows}


# --------------------------------------------------------------------------- report


def compare(reference: list[dict], other: list[dict]) -> dict:
    """Score differences and response differences between two runs over the same masks."""
    score_diff = max(abs(r["score"] - o["score"]) for r, o in zip(reference, other))
    ll_diff, text_diff = 0.0, 0
    for r, o in zip(reference, other):
        for rs, os_ in zip(r["samples"], o["samples"]):
            a, b = rs["response"], os_["response"]
            if isinstance(a, list):
                ll_diff = max(ll_diff, float(np.max(np.abs(np.array([c[0] for c in a]) - np.array([c[0] for c in b])))))
            elif a != b:
                text_diff += 1
    return {"max_score_diff": score_diff, "max_loglik_diff": ll_diff, "different_texts": text_diff}


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM

    from headloc.model.ablation import HeadGeometry
    from headloc.engine.evaluation import TaskSpec
    from headloc.methods import make_masks
    from headloc.model.loading import load_config

    location = model_dir(args.model_dir)
    config = load_config(str(location))
    with torch.device("meta"):  # shapes only, no weights
        n_params = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())

    geometry = HeadGeometry.of(config)
    masks = make_masks(geometry.total, args.masks, method="cs_stratified", sparsity=args.sparsity,
                       random_state=args.seed)
    load_before = os.getloadavg()
    ceiling = matmul_ceiling(config, rows=512)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__} with {torch.get_num_threads()} threads; load average "
          f"{load_before[0]:.2f} before the run")
    print(f"model: {location} ({n_params / 1e6:.1f}M parameters, {geometry.n_layers} layers x "
          f"{geometry.n_heads} heads); {args.masks} cs_stratified masks (sparsity {args.sparsity}, "
          f"seed {args.seed}), {args.docs} documents per task")
    print(f"matmul ceiling: {ceiling['gflops']:.1f} GFLOP/s on the model's layer shapes "
          f"({ceiling['rows']} rows) = {ceiling['tokens_per_s']:.0f} tokens/s "
          f"({ceiling['flops_per_token'] / 1e6:.0f} MFLOP/token of linear layers; 2 x params = "
          f"{2 * n_params / 1e6:.0f} MFLOP/token)", flush=True)

    report = {"model": str(location), "params": n_params, "masks": args.masks, "docs": args.docs,
              "batch_size": args.batch_size, "masks_per_pass": args.masks_per_pass,
              "rows_per_pass": args.rows_per_pass,
              "threads": torch.get_num_threads(), "ceiling": ceiling, "tasks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            spec = TaskSpec(TASKS[task]).with_data_file(write_docs(task, args.docs, args.seed, Path(tmp)))
            variants = {}
            if not args.skip_released:
                counter = TokenCounter()
                start = time.perf_counter()
                results = run_released(location, spec, masks, counter)
                variants["a"] = {"label": "(a) released: load + fresh lm-eval per mask, batch 1",
                                 "seconds": time.perf_counter() - start, "setup": 0.0,
                                 "tokens": counter.tokens, "results": results}
                print(f"  {task} (a) done in {variants['a']['seconds']:.1f} s", flush=True)
            for key, per_pass, rows in (("b", 1, args.batch_size), ("c", args.masks_per_pass, args.rows_per_pass)):
                counter = TokenCounter()
                start = time.perf_counter()
                results, setup = run_headloc(location, spec, masks, counter, batch_size=rows,
                                             masks_per_pass=per_pass)
                label = (f"(b) headloc: 1 load, masks in turn, batch {rows}" if key == "b" else
                         f"(c) headloc: 1 load, {per_pass} masks/pass, {rows} rows/pass")
                variants[key] = {"label": label, "seconds": time.perf_counter() - start, "setup": setup,
                                 "tokens": counter.tokens, "results": results}
                print(f"  {task} ({key}) done in {variants[key]['seconds']:.1f} s", flush=True)
            report["tasks"][task] = variants
    load_after = os.getloadavg()

    print()
    header = (f"{'task':<9} {'variant':<52} {'s/mask':>7} {'/(a)':>6} {'speed-up':>8} "
              f"{'tokens':>8} {'tok/s':>6} {'ceiling':>7} {'setup s':>7}")
    print(header)
    print("-" * len(header))
    for task, variants in report["tasks"].items():
        base = variants.get("a")
        for key, v in variants.items():
            v["s_per_mask"] = v["seconds"] / args.masks
            v["tokens_per_s"] = v["tokens"] / v["seconds"]
            ratio = v["seconds"] / base["seconds"] if base else float("nan")
            v["ratio_to_a"] = ratio
            print(f"{task:<9} {v['label']:<52} {v['s_per_mask']:>7.2f} {ratio:>6.3f} "
                  f"{1 / ratio:>7.1f}x {v['tokens']:>8} {v['tokens_per_s']:>6.0f} "
                  f"{v['tokens_per_s'] / ceiling['tokens_per_s']:>6.0%} {v['setup']:>7.1f}")
    print()
    print("ratios (time per mask, lower is faster):")
    for task, variants in report["tasks"].items():
        if "a" in variants:
            print(f"  {task}: (b)/(a) = {variants['b']['ratio_to_a']:.3f}, (c)/(a) = {variants['c']['ratio_to_a']:.3f}"
                  f"  ->  (c) is {1 / variants['c']['ratio_to_a']:.1f}x faster than (a)")
    print("same results (per-mask scores; log-likelihoods; generated texts):")
    all_same = True
    for task, variants in report["tasks"].items():
        reference_key = "a" if "a" in variants else "b"
        for key in variants:
            if key == reference_key:
                continue
            diff = compare(variants[reference_key]["results"], variants[key]["results"])
            variants[key]["vs_" + reference_key] = diff
            same = diff["max_score_diff"] == 0 and diff["different_texts"] == 0 and diff["max_loglik_diff"] < LOGLIK_TOLERANCE
            all_same &= same
            print(f"  {task} ({key}) vs ({reference_key}): {'identical scores' if diff['max_score_diff'] == 0 else 'SCORES DIFFER'}"
                  f" (max |diff| {diff['max_score_diff']:.3g}), max |loglik diff| {diff['max_loglik_diff']:.1e}, "
                  f"{diff['different_texts']} different generated texts")
    print(f"results {'ARE the same' if all_same else 'DIFFER'} (scores exactly, log-likelihoods within "
          f"{LOGLIK_TOLERANCE:g}, texts exactly)")
    print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
          f"(other processes share these CPUs when it is above 0)")
    if args.json:
        for variants in report["tasks"].values():
            for v in variants.values():
                v["scores"] = [r["score"] for r in v.pop("results")]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
