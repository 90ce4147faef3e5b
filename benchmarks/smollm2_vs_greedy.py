"""Search methods against greedy on SmolLM2-135M-Instruct's demo tasks: Delta Task of the top k.

    .venv/bin/python benchmarks/smollm2_vs_greedy.py --out results/benchmarks/vs-greedy --seeds 0 1 2 3 4
    .venv/bin/python benchmarks/smollm2_vs_greedy.py --table results/benchmarks/vs-greedy
    .venv/bin/python benchmarks/smollm2_vs_greedy.py --help

For each task of config/demo.yaml (ioi, capitals, induction) and each seed, it does what the
workflow does with ``search.seed`` = that seed: the task's full data (its ``n_docs``, generated
with the seed), the identification subset (``search.id_docs`` documents drawn with the seed),
every method searching that subset through :func:`headloc.locate` (the driver the rules' steps
share; one loaded model), then the top ``k`` heads of every search ablated on the full data and
scored with the task's validation metric, the unablated model beside it: Delta Task in
percentage points, as Table 2. Greedy and one-shot greedy run on the same subset, so each seed
compares every method with them on one yardstick.

Each search, with its validation, is appended to ``<out>/<task>-s<seed>.jsonl`` as soon as it
ends: a killed run keeps what it finished, and a rerun skips it. ``--table`` reads every
``*.jsonl`` under the folders given and prints the table (mean +- standard error over seeds).

``--universal`` names heads to leave out of a second top k, validated beside the first: what the
workflow's tables show with ``universal.filter`` on and those heads given as ``universal.heads``
(greedy's rounds, which the workflow runs without them, are not rerun so here: its filtered top k
is the tail of its own rounds). ``--options`` passes a sequential method's options (e.g.
``'{"extra_heads": 0}'``), ``--label-suffix`` names such a variant in the records.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
METHODS = ["group_testing", "cs_adaptive", "cs_stratified", "greedy1s", "greedy", "random"]


def demo_tasks() -> dict:
    """config/demo.yaml's tasks and search keys: the yardstick the demo's Table 2 uses."""
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    return config["tasks"], config["search"]


def identification_ids(n_full: int, n: int, seed: int) -> list[int]:
    """The indices of the documents rule subset_dataset keeps, by its own draw."""
    from headloc.data.datasets import identification_subset

    return identification_subset(list(range(n_full)), n, seed)


def run_seed(model, tokenizer, name: str, task: dict, search: dict, seed: int, args, out: Path) -> None:
    """Every method's search of ``name`` at ``seed``, each one's top k validated on the full data
    as soon as it is found (a record line each)."""
    import headloc
    from headloc.api.tasks import count_documents, mask_scorer, resolve_task
    from headloc.heads import HeadGeometry, headset_mask

    record = out / f"{name}-s{seed}.jsonl"
    done = [json.loads(line) for line in record.read_text().splitlines()] if record.is_file() else []
    finished = {row["method"] for row in done if row["kind"] == "validation"}
    data = {"n_docs": task.get("n_docs"), "seed": seed}
    full = resolve_task(task["lm_eval_task"], dataset_kwargs=data)
    n_full = count_documents(full)
    ids = identification_ids(n_full, search["id_docs"], seed)
    geometry = HeadGeometry.of(model.config)
    validate = mask_scorer(full, model, tokenizer, batch_size=args.batch_size, masks_per_pass=3, progress=False)
    # the search's own continuous score on the full data too (the ioi margin, a log-likelihood): it
    # does not saturate at 5 heads, so it tells methods apart where accuracy reaches its floor
    continuous = task.get("id_task") and resolve_task(task["id_task"], metric=task.get("id_metric"),
                                                      dataset_kwargs=data)
    validate_continuous = continuous and mask_scorer(continuous, model, tokenizer, batch_size=args.batch_size,
                                                     masks_per_pass=3, progress=False)
    for method in args.methods:
        label = method + args.label_suffix
        if label in finished:
            continue
        spec = headloc.methods.get(method)
        started = time.perf_counter()
        found = headloc.locate(model, tokenizer, task.get("id_task") or task["lm_eval_task"], method=method,
                               budget=args.budget if spec.budgeted else None, top_k=args.top_k, seed=seed,
                               sparsity=search["sparsity"], alpha=search["alpha"], documents=ids,
                               metric=task.get("id_metric"), dataset_kwargs=data, batch_size=args.batch_size,
                               masks_per_pass=args.masks_per_pass, progress=False,
                               options=args.options if spec.options else None)
        seconds = time.perf_counter() - started
        # the top k ablated on the full data, and the top k with the universal heads left out, the
        # unablated model beside them (one pass each)
        filtered = [head for head in found.ranking if head not in args.universal][: args.top_k]
        masks = [headset_mask(heads, geometry.n_layers, geometry.n_heads).reshape(-1)
                 for heads in (found.top_heads, filtered)]
        clean, ablated, ablated_filtered = validate(np.vstack([np.zeros_like(masks[0]), *masks]),
                                                    desc=f"validate {name}")
        scored = {}
        if validate_continuous:
            scored["id_clean"], scored["id_ablated"], scored["id_filtered_ablated"] = (float(v) for v in validate_continuous(
                np.vstack([np.zeros_like(masks[0]), *masks]), desc=f"validate {name} ({task.get('id_metric')})"))
            scored["id_metric"] = task.get("id_metric")
        row = {"kind": "validation", "task": name, "seed": seed, "method": label, "top": found.top_heads,
               "n_evals": found.n_evals, "seconds": seconds, "n_docs": n_full, "clean": clean, "ablated": ablated,
               "universal": list(args.universal), "filtered_top": filtered, "filtered_ablated": ablated_filtered,
               "labels": [found.record.get("labels", {}).get(head, "") for head in filtered], **scored}
        _append(record, row)
        print(f"{name} s{seed} {label}: {row['n_evals']} evals, {seconds:.1f} s, top {row['top']}, "
              f"Delta Task {100 * (ablated - clean):+.1f} on {n_full} documents; without {args.universal}: "
              f"{filtered} {100 * (ablated_filtered - clean):+.1f}", flush=True)


def _append(path: Path, row: dict) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def table(folders: list[Path]) -> str:
    """The markdown table of every record under ``folders``: per task and method, over the seeds
    validated, Delta Task (mean +- s.e.), its gap to greedy's, the overlap of the top k with
    greedy's, masked evaluations (and their share of greedy's) and seconds per search."""
    import pandas as pd

    rows = [json.loads(line) for folder in folders for path in sorted(Path(folder).glob("*.jsonl"))
            for line in path.read_text().splitlines()]
    frame = pd.DataFrame(rows).drop_duplicates(["task", "seed", "method"])
    frame["delta"] = 100 * (frame["ablated"] - frame["clean"])
    frame["filtered"] = 100 * (frame.get("filtered_ablated", np.nan) - frame["clean"])
    if "id_metric" in frame:  # the search's continuous score on the full data: rows "<task> (<metric>)", own unit
        own = frame.dropna(subset=["id_metric"]).copy()
        own["task"] = own["task"] + " (" + own["id_metric"] + ")"
        own["delta"] = own["id_ablated"] - own["id_clean"]
        own["filtered"] = own["id_filtered_ablated"] - own["id_clean"]
        frame = pd.concat([frame, own], ignore_index=True)
    greedy = frame[frame.method == "greedy"].set_index(["task", "seed"])
    frame["gap"] = [d - greedy["delta"].get((t, s), np.nan) for t, s, d in zip(frame.task, frame.seed, frame.delta)]
    frame["overlap"] = [len(set(top) & set(greedy["top"].get((t, s), []))) if (t, s) in greedy.index else np.nan
                        for t, s, top in zip(frame.task, frame.seed, frame.top)]
    frame["share"] = [n / greedy["n_evals"].get((t, s), np.nan) for t, s, n in zip(frame.task, frame.seed, frame.n_evals)]
    lines = ["| task | method | seeds | Delta Task (pp; a metric's own unit in brackets) | minus greedy's | top-5 overlap with greedy | evaluations "
             "| share of greedy's | seconds | Delta Task, universal heads left out |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (task, method), g in frame.groupby(["task", "method"], sort=False):
        lines.append(f"| {task} | {method} | {len(g)} | {_mean_se(g.delta)} | {_mean_se(g.gap)} | "
                     f"{g.overlap.mean():.1f} | {g.n_evals.mean():.0f} | {100 * g.share.mean():.1f} % | "
                     f"{g.seconds.mean():.1f} | {_mean_se(g.filtered)} |")
    return "\n".join(lines)


def _mean_se(values) -> str:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return "-"
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return f"{values.mean():+.1f} ± {se:.1f}" if len(values) > 1 else f"{values.mean():+.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="checkpoint folder (default: the demo's converted SmolLM2, as "
                                        "benchmarks/methods_smollm2.py finds or makes it)")
    parser.add_argument("--gguf", help="convert this GGUF into --model first (a folder that exists is used as is)")
    parser.add_argument("--tasks", nargs="+", help="tasks of config/demo.yaml (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=METHODS)
    parser.add_argument("--budget", type=int, default=100, help="masks of a budgeted method (default 100)")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--universal", nargs="*", default=[],
                        help="heads left out of a second, filtered top k (as universal.filter with universal.heads)")
    parser.add_argument("--options", type=json.loads, default=None,
                        help="a sequential method's options, JSON (e.g. '{\"extra_heads\": 0}')")
    parser.add_argument("--label-suffix", default="", help="appended to the method's name in the records")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=128, help="rows per forward pass")
    parser.add_argument("--masks-per-pass", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="folder of the records (one .jsonl per task and seed)")
    parser.add_argument("--table", type=Path, nargs="+", help="print the table of these folders' records")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.out is None:
        parser.error("--out is required to run searches")
    import torch

    from headloc.model.loading import convert_gguf, load_model

    torch.set_num_threads(args.threads)
    if args.model is None:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from methods_smollm2 import model_dir  # the embedded SmolLM2, converted once
    location = args.model or str(model_dir())
    if args.gguf and not (Path(location) / "config.json").is_file():
        convert_gguf(args.gguf, location)
    model, tokenizer = load_model(location, dtype="float32", device=args.device)
    tasks, search = demo_tasks()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.tasks or list(tasks):
        for seed in args.seeds:
            run_seed(model, tokenizer, name, tasks[name], search, seed, args, args.out)


if __name__ == "__main__":
    main()
