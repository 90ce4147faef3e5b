"""Every search method measured against planted heads (issue 22): recall of a planted model's task
heads in each method's top k, by budget and seed.

    .venv/bin/python benchmarks/ground_truth.py results/planted/tiny            # every method
    .venv/bin/python benchmarks/ground_truth.py results/planted/tiny results/planted/smol \\
        --methods cs_stratified cs_adaptive greedy --budgets 25 50 100 200 --seeds 5 --score acc
    .venv/bin/python benchmarks/ground_truth.py --help

Input: planted model folders as rules/ground_truth.smk builds them (``<name>/model/`` and
``<name>/truth.json``). For each task of each model, k is the size of the task's planted set (its
universal head, its role heads, both heads of a redundant pair). Each method runs by its kind
through :func:`headloc.methods.driver.drive`, the calls the workflow's rules make: a mask design
(cs_adaptive's stage 2 as rule refine_masks makes it), greedy's rounds (k rounds, no universal
filter: the universal head is one of the planted heads to find), a gradient method's ``run``, a
draw; then the recovery step ranks the heads. It runs in one process: the masks are scored with
:func:`headloc.groundtruth.truth.score_masks` (several masks per forward pass) on all of the task's
documents, by accuracy (``--score acc``, the task's lm-eval metric) or by the gold answer's mean
log-probability among the choices (``--score logprob``, a continuous score).

Reported per model, task, method and budget (mean over seeds): evaluations spent, recall of the
planted set in the top k, recall of the *effective* set (the planted heads truth.json does not flag
as ``planted_but_weak``, in the top k of the same size), and whether the redundant pair is in the
top k. Then, per model and method, the smallest budget whose mean recall over every task reaches
``--goal`` (95 %) and its ratio to greedy's evaluations. Writes ``<out>/recall.csv``,
``<out>/summary.md`` and ``<out>/recall.png`` (recall against evaluations, one panel per model).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from headloc import methods
from headloc.groundtruth.truth import encode, load_planted, read_documents, score_masks
from headloc.heads import HeadGeometry
from headloc.methods.driver import drive

LOG = logging.getLogger("ground_truth")
DEFAULT_BUDGETS = (25, 50, 100, 200)


class Scorer:
    """One task's documents on one model: masks -> scores, counting the evaluations."""

    def __init__(self, model, tokenizer, folder, task: str, score: str, docs: int | None = None):
        self.model = model
        self.data = encode(tokenizer, read_documents(folder, task)[:docs])
        self.column = {"acc": 0, "logprob": 1}[score]

    def __call__(self, masks) -> np.ndarray:
        return score_masks(self.model, *self.data, masks)[self.column]

    def examples(self):
        """The documents as gold continuations (the gradient methods' input)."""
        from headloc.engine.supervision import Example

        contexts, choices, labels = self.data
        gold = choices[torch.arange(len(labels)), labels]
        return [Example(i, tuple(c.tolist()), (int(g),)) for i, (c, g) in enumerate(zip(contexts, gold))]


def runs_of(method, budgets, seeds):
    """(budget, seed) pairs a method is run at: budgets only for budgeted methods, seeds only where
    the method is random (greedy and one-shot greedy are deterministic: one run)."""
    spend = budgets if method.budgeted else [None]
    draws = seeds if (method.repeats or method.kind in ("gradient", "draw")) else seeds[:1]
    return [(b, s) for b in spend for s in draws]


def recall(top: list[str], truth: list[str]) -> float:
    return len(set(top) & set(truth)) / len(truth) if truth else float("nan")


def task_truth(entry: dict) -> dict:
    planted = entry["planted_set"]["heads"]
    weak = set(entry.get("planted_but_weak", []))
    pair = entry.get("pair", {}).get("heads", [])
    return {"planted": planted, "effective": [h for h in planted if h not in weak or h in pair], "pair": pair}


def benchmark(folder: Path, wanted: list[str], budgets, seeds, score: str, sparsity: float,
              docs: int | None = None, tasks: list[str] | None = None) -> pd.DataFrame:
    truth = json.loads((folder / "truth.json").read_text())
    model, tokenizer, _ = load_planted(folder / "model")
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    geometry = HeadGeometry(n_layers, n_heads)
    names = geometry.names
    rows = []
    for task, entry in truth["tasks"].items():
        if tasks and task not in tasks:
            continue
        scorer, sets = Scorer(model, tokenizer, folder / "model", task, score, docs), task_truth(entry)
        k = len(sets["planted"])
        for name in wanted:
            method = methods.get(name)
            for budget, seed in runs_of(method, budgets, seeds):
                start = time.perf_counter()
                with tempfile.TemporaryDirectory() as tmp:
                    gradient = (model, scorer.examples(), method.defaults) if method.kind == "gradient" else None
                    found = drive(method, scorer, geometry, Path(tmp), budget=budget or 0, seed=seed, k=k,
                                  sparsity=sparsity, alpha=0.001, gradient=gradient, log=LOG)
                top = found["ranking"][:k]
                rows.append({
                    "model": folder.name, "n_heads": len(names), "task": task, "method": name, "budget": budget,
                    "seed": seed, "n_evals": found["n_evals"], "k": k,
                    "recall": recall(top, sets["planted"]),
                    "recall_effective": recall(found["ranking"][:len(sets["effective"])], sets["effective"]),
                    "pair_found": bool(sets["pair"]) and set(sets["pair"]) <= set(top),
                    "top": "+".join(top), "seconds": round(time.perf_counter() - start, 2),
                })
                LOG.info("%s %s %s budget %s seed %d: recall %.2f (%d evaluations)", folder.name, task, name,
                         budget, seed, rows[-1]["recall"], found["n_evals"])
    return pd.DataFrame(rows)


def summarise(table: pd.DataFrame, goal: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean over seeds per (model, task, method, budget), and per (model, method) the budget where the
    mean recall over the model's tasks first reaches ``goal``, with its ratio to greedy's evaluations."""
    keys = ["model", "n_heads", "task", "method", "budget"]
    means = (table.assign(budget=table["budget"].fillna(-1))
             .groupby(keys, as_index=False)
             .agg(n_evals=("n_evals", "mean"), recall=("recall", "mean"), recall_sd=("recall", "std"),
                  recall_effective=("recall_effective", "mean"), pair_found=("pair_found", "mean"),
                  k=("k", "first"), seeds=("seed", "nunique")))
    per_budget = means.groupby(["model", "n_heads", "method", "budget"], as_index=False).agg(
        n_evals=("n_evals", "mean"), recall=("recall", "mean"), recall_effective=("recall_effective", "mean"))
    greedy = per_budget[per_budget["method"] == methods.REFERENCE].set_index("model")["n_evals"]
    reached = []
    for (model, n, method), group in per_budget.groupby(["model", "n_heads", "method"]):
        row = {"model": model, "n_heads": n, "method": method}
        for column in ("recall", "recall_effective"):
            hit = group[group[column] >= goal].sort_values("n_evals")
            evals = float(hit["n_evals"].iloc[0]) if len(hit) else float("nan")
            row.update({f"best_{column}": group[column].max(), f"evals_at_goal_{column}": evals,
                        f"ratio_to_greedy_{column}": evals / greedy.get(model, float("nan"))})
        reached.append(row)
    return means, pd.DataFrame(reached)


def task_budgets(means: pd.DataFrame, goal: float) -> pd.DataFrame:
    """Per (model, task), the fewest masks at which a budgeted mask design's mean recall of the
    planted set reached ``goal``, the best design's, and that budget over k ln(N / k): the data of
    the budget advice (headloc.search.budget). Tasks no design reached are listed with NaN."""
    budgeted = means[means["method"].map(lambda name: methods.get(name).budgeted)]
    rows = []
    for (model, n, task), group in budgeted.groupby(["model", "n_heads", "task"]):
        k = int(group["k"].iloc[0])
        hit = group[group["recall"] >= goal].sort_values(["n_evals", "method"])
        masks = float(hit["n_evals"].iloc[0]) if len(hit) else float("nan")
        rows.append({"model": model, "n_heads": n, "task": task, "k": k,
                     "method": hit["method"].iloc[0] if len(hit) else "-", "masks_at_goal": masks,
                     "per_k_log_n": masks / (k * math.log(n / k))})
    return pd.DataFrame(rows)


def plot(means: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(means.sort_values("n_heads")["model"]))  # smallest model first
    colours = {name: f"C{i}" for i, name in enumerate(sorted(means["method"].unique()))}  # one per method in every panel
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models):
        mine = means[means["model"] == model].groupby(["method", "budget"], as_index=False).agg(
            n_evals=("n_evals", "mean"), recall=("recall", "mean"))
        for method, group in mine.groupby("method"):
            group = group.sort_values("n_evals")
            if (group["n_evals"] <= 0).all():  # a draw: no evaluations, a level line
                ax.axhline(group["recall"].mean(), ls=":", color="gray", label=method)
                continue
            ax.plot(group["n_evals"].clip(lower=1), group["recall"], marker=methods.get(method).marker,
                    color=colours[method], label=method)
        n_heads = int(means.loc[means["model"] == model, "n_heads"].iloc[0])
        ax.set(xscale="log", ylim=(0, 1.05), xlabel="evaluations (masked forward passes of the task)",
               ylabel="recall of the planted heads in the top k", title=f"{model} ({n_heads} heads)")
        ax.grid(alpha=0.3)
    handles = {}  # every method of any panel, once (a panel may lack some)
    for ax in axes[0]:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    axes[0][-1].legend(handles.values(), handles.keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", type=Path, help="planted model folders (results/planted/<name>)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="CSV",
                        help="summarise the recall.csv files of earlier runs instead of running")
    parser.add_argument("--methods", nargs="+", default=methods.names(), choices=methods.names())
    parser.add_argument("--budgets", nargs="+", type=int, default=list(DEFAULT_BUDGETS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds per random method and budget")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed (more seeds for an earlier run: --merge both recall.csv files)")
    parser.add_argument("--score", choices=("acc", "logprob"), default="acc")
    parser.add_argument("--sparsity", type=float, default=0.05, help="share of heads a random mask ablates")
    parser.add_argument("--docs", type=int, help="score the first N documents of each task (default: all)")
    parser.add_argument("--tasks", nargs="+", help="only these tasks (default: every task in truth.json)")
    parser.add_argument("--goal", type=float, default=0.95)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/ground_truth"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.merge:
        table = pd.concat([pd.read_csv(path) for path in args.merge])
    elif args.models:
        table = pd.concat([benchmark(m, args.methods, args.budgets, seeds, args.score, args.sparsity, args.docs,
                                     args.tasks) for m in args.models])
    else:
        parser.error("name planted model folders, or --merge recall.csv files")
    means, reached = summarise(table, args.goal)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "recall.csv", index=False)
    text = (f"# Recall of the planted heads ({args.score} score, sparsity {args.sparsity:g}, "
            f"{table['seed'].nunique()} seeds)\n\n" + means.round(3).to_markdown(index=False) +
            f"\n\n## Smallest budget whose mean recall over the tasks reaches {args.goal:.0%}\n\n" +
            reached.round(4).to_markdown(index=False) +
            f"\n\n## Per task: the fewest masks whose mean recall reaches {args.goal:.0%} (budget advice)\n\n" +
            task_budgets(means, args.goal).round(2).to_markdown(index=False) + "\n")
    (args.out / "summary.md").write_text(text)
    plot(means, args.out / "recall.png")
    print(text)


if __name__ == "__main__":
    main()
