"""Every search method measured against certified planted heads: what a user needs to know (issue 31).

    .venv/bin/python benchmarks/ground_truth.py results/planted/c32-s0 results/planted/c32-s1 ...
    .venv/bin/python benchmarks/ground_truth.py results/planted/c1024-s* --methods cs_stratified greedy1s \
        group_testing --budgets 50 100 200 --seeds 5
    .venv/bin/python benchmarks/ground_truth.py --merge out1/recall.csv out2/recall.csv --out merged

Input: planted model folders as ground_truth.smk builds them (``<name>/model/`` and
``<name>/truth.json``); placements of one size share the part of the name before ``-s``. Each
task's documents are the first ``stratify`` ones of its design (every kind in its share: the
documents truth.json's certificate is measured on), scored by the searches' score, the gold
answer's mean log-probability among the choices (:func:`headloc.groundtruth.truth.score_masks`).

Each method runs as the workflow runs it: by its kind through :func:`headloc.methods.driver.drive`
(a mask design, cs_adaptive's refinement, greedy's rounds, a gradient run, a draw) with the
config's defaults (alpha ``cv``, sparsity 0.05), then ``Method.recover``; the sequential searches
(group testing, Thompson sampling) too, and ``thompson_damage``, Thompson sampling rewarding damage
(its config's ``reward: damage``).

What is scored, per task (``headloc.groundtruth.scoring``): a top k with a slot for every
planted head of the task (k = its planted heads), and in it

- **recall**: the share of the task's singles (role heads that act alone, a backup's primary
  among them), so that finding the universal head (which nearly every method does) does not
  inflate it;
- **recall_backup**, **recall_redundant**, **recall_synergy**: the share of each interaction
  kind's heads (a backup head matters only once its primary is ablated; a redundant pair's heads
  do nothing alone; a synergy pair's each break the task);
- **universal_found**, **pair_found** (both heads of the certified design's pair in the top k);
- **certified**: whether truth.json's certificate and every interaction's pass for the task; the
  goal claims use certified tasks only (a failing task is reported, never hidden).

Reported per size, method and budget over placements x seeds: mean recall with its standard
error, P(recall = 1), the share of runs that found the universal head and the pair, each
interaction kind's mean recall and P(recall = 1), evaluations, and the ratio of evaluations to
greedy's on the same task; the smallest budget meeting the goal (mean recall >= 0.95 and
P(recall = 1) >= 0.9); the budget advice refit from every cell. Writes ``<out>/recall.csv``,
``<out>/summary.md`` and ``<out>/recall.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from headloc import methods
from headloc.groundtruth.recipe import Design
from headloc.groundtruth.scoring import GOAL_ALL_FOUND, GOAL_RECALL, budget_fit, found, goal_cells, summarise, task_truth
from headloc.groundtruth.truth import encode, load_planted, read_documents, score_masks
from headloc.heads import HeadGeometry
from headloc.methods.driver import drive
from headloc.methods.settings import SearchSettings

LOG = logging.getLogger("ground_truth")
DEFAULT_BUDGETS = (50, 100, 200)
# the workflow's defaults, read where they live (config/schema.yaml's search section)
SEARCH = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "schema.yaml").read_text())[
    "properties"]["search"]["properties"]
SPARSITY, ALPHA = SEARCH["sparsity"]["default"], SEARCH["alpha"]["default"]


# The searches' score here is the gold's mean log-probability among the choices: about -1.39 at
# chance among 4, lower for a confidently wrong model, 0 at best. Thompson sampling maps a score into
# [0, 1] through its score_range (its config section), so it is given this one.
OPTIONS = {"thompson": {"score_range": [-3.0, 0.0]}}
# Variants run beside the registered methods: name -> (method, its config section over OPTIONS).
VARIANTS = {"thompson_damage": ("thompson", {"reward": "damage"}),
            "conditional_screen": ("conditional_group_testing", {"pair_screen": True})}


def method_of(name: str):
    """(registered method, options) of a benchmark name: a method's own, or a variant's."""
    base, options = VARIANTS.get(name, (name, {}))
    return methods.get(base), {**OPTIONS.get(base, {}), **options}


class Scorer:
    """One task's searched documents on one model: masks -> gold log-probabilities, counting evaluations."""

    def __init__(self, model, tokenizer, folder, task: str, docs: int):
        self.model = model
        self.data = encode(tokenizer, read_documents(folder, task)[:docs])

    def __call__(self, masks) -> np.ndarray:
        return score_masks(self.model, *self.data, masks)[1]

    def examples(self):
        """The documents as gold continuations (the gradient methods' input)."""
        from headloc.engine.supervision import Example

        contexts, choices, labels = self.data
        gold = choices[torch.arange(len(labels)), labels]
        return [Example(i, tuple(c.tolist()), (int(g),)) for i, (c, g) in enumerate(zip(contexts, gold))]


def runs_of(name: str, budgets, seeds):
    """(budget, seed) pairs a method is run at: budgets only for budgeted methods, seeds only where
    the method is random (greedy and one-shot greedy are deterministic: one run per placement)."""
    method = method_of(name)[0]
    spend = budgets if method.budgeted else [None]
    draws = seeds if method.random else seeds[:1]
    return [(b, s) for b in spend for s in draws]


def ranking_of(name: str, scorer: Scorer, names: list[str], budget, seed: int, k: int, model) -> tuple[list[str], int]:
    """The method's ranking (head names, most damaging first) and its evaluations."""
    method, options = method_of(name)
    with tempfile.TemporaryDirectory() as tmp:
        gradient = (model, scorer.examples()) if method.kind.gold else None
        settings = SearchSettings(**({"n_masks": budget} if budget else {}), seed=seed, top_k=k, sparsity=SPARSITY,
                                  alpha=ALPHA, options={method.name: options} if method.options else {})
        found = drive(method, scorer, HeadGeometry(model.config.num_hidden_layers, model.config.num_attention_heads),
                      Path(tmp), settings, gradient=gradient, log=LOG)
    return found["ranking"], found["n_evals"]


def benchmark(folder: Path, wanted: list[str], budgets, seeds, tasks: list[str] | None = None,
              device: str = "cpu", partial: Path | None = None) -> pd.DataFrame:
    """One planted model's rows (one per task x method x budget x seed); each finished row is also
    written to ``partial`` at once, so that a run cut short keeps what it measured."""
    truth = json.loads((folder / "truth.json").read_text())
    model, tokenizer, planted = load_planted(folder / "model")
    model.to(device)  # the scores and the gradient methods run where the model is
    design = Design.from_dict(planted["recipe"]["design"])
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    names = HeadGeometry(n_layers, n_heads).names
    size = folder.name.rsplit("-s", 1)[0]
    rows = []
    for task, entry in truth["tasks"].items():
        if tasks and task not in tasks:
            continue
        scorer, sets = Scorer(model, tokenizer, folder / "model", task, design.stratify or None), task_truth(entry)
        k = sets["k"]
        for name in wanted:
            for budget, seed in runs_of(name, budgets, seeds):
                start = time.perf_counter()
                ranking, n_evals = ranking_of(name, scorer, names, budget, seed, k, model)
                rows.append({
                    "size": size, "model": folder.name, "n_heads": len(names), "task": task, "method": name,
                    "budget": budget, "seed": seed, "n_evals": n_evals, "k": k, "certified": sets["certified"],
                    **found(ranking[:k], sets), "top": "+".join(ranking[:k]),
                    "seconds": round(time.perf_counter() - start, 2),
                })
                LOG.info("%s %s %s budget %s seed %d: recall %.2f (%d evaluations, %.1f s)", folder.name, task, name,
                         budget, seed, rows[-1]["recall"], n_evals, rows[-1]["seconds"])
                if partial:
                    pd.DataFrame(rows).to_csv(partial, index=False)
    return pd.DataFrame(rows)


def plot(summary: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(dict.fromkeys(summary.sort_values("n_heads")["size"]))  # smallest first
    palette = plt.get_cmap("tab20").colors  # more methods than the default cycle's 10 colours
    colours = {name: palette[i % len(palette)] for i, name in enumerate(sorted(summary["method"].unique()))}
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        mine = summary[summary["size"] == size]
        for method, group in mine.groupby("method"):
            group = group.sort_values("n_evals")
            if (group["n_evals"] <= 0).all():  # a draw: no evaluations, a level line
                ax.axhline(group["recall"].mean(), ls=":", color="gray", label=method)
                continue
            marker = method_of(method)[0].marker
            ax.errorbar(group["n_evals"].clip(lower=1), group["recall"], yerr=group["se"].fillna(0),
                        marker=marker, color=colours[method], label=method, capsize=2)
        n_heads = int(mine["n_heads"].iloc[0])
        ax.set(xscale="log", ylim=(0, 1.05), xlabel="evaluations (masked forward passes of the task)",
               ylabel="recall of the role heads in the top k", title=f"{size} ({n_heads} heads)")
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[0]:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    axes[0][-1].legend(handles.values(), handles.keys(), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(table: pd.DataFrame, out: Path) -> str:
    summary = summarise(table)
    failing = table[~table["certified"]][["model", "task"]].drop_duplicates()
    text = (f"# Recall of the certified planted heads (gold log-probability, sparsity {SPARSITY:g})\n\n"
            + summary.dropna(axis=1, how="all").round(3).to_markdown(index=False)  # kinds no task has: left out
            + f"\n\n## Cheapest budget with mean recall >= {GOAL_RECALL} and P(recall = 1) >= {GOAL_ALL_FOUND}\n\n"
            + (goal_cells(summary).dropna(axis=1, how="all").round(3).to_markdown(index=False)
               if len(summary) else "none")
            + "\n\n## Budget advice data (fewest masks at mean recall >= 0.95, per task)\n\n"
            + budget_fit(table).round(2).to_markdown(index=False)
            + "\n\nTasks left out (certificate failing): "
            + (", ".join(f"{m}/{t}" for m, t in failing.itertuples(index=False)) or "none") + "\n")
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "recall.csv", index=False)
    (out / "summary.md").write_text(text)
    if len(summary):
        plot(summary, out / "recall.png")
    return text


def main(argv=None) -> None:
    names = methods.names() + list(VARIANTS)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", type=Path, help="planted model folders (results/planted/<name>)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="CSV",
                        help="summarise the recall.csv files of earlier runs instead of running")
    parser.add_argument("--methods", nargs="+", default=names, choices=names)
    parser.add_argument("--budgets", nargs="+", type=int, default=list(DEFAULT_BUDGETS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds per random method and budget")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed (more seeds for an earlier run: --merge both recall.csv files)")
    parser.add_argument("--tasks", nargs="+", help="only these tasks (default: every task in truth.json)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, cuda:1, ...")
    parser.add_argument("--out", type=Path, default=Path("results/ground_truth"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # fonts missing here: no finding
    torch.set_num_threads(args.threads)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.merge:
        table = pd.concat([pd.read_csv(path) for path in args.merge])
    elif args.models:
        args.out.mkdir(parents=True, exist_ok=True)
        table = pd.concat([benchmark(m, args.methods, args.budgets, seeds, args.tasks, args.device,
                                     partial=args.out / f"{m.name}.partial.csv") for m in args.models])
    else:
        parser.error("name planted model folders, or --merge recall.csv files")
    print(report(table, args.out))


if __name__ == "__main__":
    main()
