"""Every search method measured against certified planted heads (benchmarks/ground_truth.py).

Input: planted model folders as ground_truth.smk builds them (``<name>/model/`` and
``<name>/truth.json``); placements of one size share the part of the name before ``-s``. Each
task's documents are the first ``stratify`` ones of its design (every kind in its share: the
documents truth.json's certificate is measured on), scored by the searches' score, the gold
answer's mean log-probability among the choices (:func:`headloc.groundtruth.mask_scores.score_masks`).

Each method runs as the workflow runs it: by its kind through :func:`headloc.methods.driver.drive`
(a mask design, cs_adaptive's refinement, greedy's rounds, a gradient run, a draw) with the
config's ``sparsity`` and ``alpha``, then ``Method.recover``; the sequential searches (group
testing, Thompson sampling) too, and ``thompson_damage``, Thompson sampling rewarding damage (its
config's ``reward: damage``). Budgets apply to budgeted methods only, seeds to random ones only
(:func:`runs_of`).

What is scored, per task, is :mod:`headloc.groundtruth.scoring`'s: a top k with a slot for every
planted head of the task, the recall of its singles and of each interaction kind's heads, the
universal head and the pair found or not, and whether the task is certified (the goal claims use
certified tasks only; a failing task is reported, never hidden). :func:`report` writes
``recall.csv`` (one row per search), ``summary.md`` (per size, method and budget over placements
x seeds; the cheapest cell meeting the goal; the budget advice data) and ``recall.png``.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from headloc import methods
from headloc.groundtruth.scoring import GOAL_ALL_FOUND, GOAL_RECALL, budget_fit, found, goal_cells, summarise, task_truth
from headloc.heads import HeadGeometry

LOG = logging.getLogger("headloc.groundtruth.benchmark")
DEFAULT_BUDGETS = (50, 100, 200)
# The searches' score here is the gold's mean log-probability among the choices: about -1.39 at
# chance among 4, lower for a confidently wrong model, 0 at best. Thompson sampling maps a score into
# [0, 1] through its score_range (its config section), so it is given this one.
OPTIONS = {"thompson": {"score_range": [-3.0, 0.0]}}
# Variants run beside the registered methods: name -> (method, its config section over OPTIONS).
VARIANTS = {"thompson_damage": ("thompson", {"reward": "damage"}),
            "conditional_screen": ("conditional_group_testing", {"pair_screen": True})}


def method_names() -> list[str]:
    """Every name the benchmark runs: the registered methods, then the variants."""
    return methods.names() + list(VARIANTS)


def method_of(name: str):
    """(registered method, options) of a benchmark name: a method's own, or a variant's."""
    base, options = VARIANTS.get(name, (name, {}))
    if base not in methods.names():
        raise ValueError(f"unknown method {name!r}; expected one of {', '.join(method_names())}")
    return methods.get(base), {**OPTIONS.get(base, {}), **options}


class Scorer:
    """One task's searched documents on one model: masks -> gold log-probabilities."""

    def __init__(self, model, tokenizer, folder, task: str, docs: int | None):
        from headloc.groundtruth.mask_scores import encode, read_documents

        self.model = model
        self.data = encode(tokenizer, read_documents(folder, task)[:docs])

    def __call__(self, masks) -> np.ndarray:
        from headloc.groundtruth.mask_scores import score_masks

        return score_masks(self.model, *self.data, masks)[1]

    def examples(self):
        """The documents as gold continuations (the gradient methods' input)."""
        import torch

        from headloc.engine.supervision import Example

        contexts, choices, labels = self.data
        gold = choices[torch.arange(len(labels)), labels]
        return [Example(i, tuple(c.tolist()), (int(g),)) for i, (c, g) in enumerate(zip(contexts, gold))]


def runs_of(name: str, budgets, seeds) -> list[tuple]:
    """(budget, seed) pairs a method is run at: budgets only for budgeted methods, seeds only where
    the method is random (greedy and one-shot greedy are deterministic: one run per placement)."""
    method = method_of(name)[0]
    spend = list(budgets) if method.budgeted else [None]
    draws = list(seeds) if method.random else list(seeds)[:1]
    return [(b, s) for b in spend for s in draws]


def ranking_of(name: str, scorer: Scorer, budget, seed: int, k: int, *, sparsity: float, alpha) -> tuple[list[str], int]:
    """The method's ranking (head names, most damaging first) and its evaluations."""
    from headloc.methods.driver import drive
    from headloc.methods.settings import SearchSettings

    method, options = method_of(name)
    model = scorer.model
    settings = SearchSettings(**({"n_masks": budget} if budget else {}), seed=seed, top_k=k, sparsity=sparsity,
                              alpha=alpha, options={method.name: options} if method.options else {})
    with tempfile.TemporaryDirectory() as tmp:
        gradient = (model, scorer.examples()) if method.kind.gold else None
        driven = drive(method, scorer, HeadGeometry.of(model.config), Path(tmp), settings, gradient=gradient, log=LOG)
    return driven["ranking"], driven["n_evals"]


def benchmark(folder: Path, wanted: list[str], budgets, seeds, *, sparsity: float, alpha, tasks=None,
              device: str = "cpu", partial: Path | None = None) -> pd.DataFrame:
    """One planted model's rows (one per task x method x budget x seed); each finished row is also
    written to ``partial`` at once, so that a run cut short keeps what it measured."""
    from headloc.groundtruth.design import Design
    from headloc.groundtruth.mask_scores import load_planted

    truth = json.loads((folder / "truth.json").read_text())
    unknown = sorted(set(tasks or ()) - set(truth["tasks"]))
    if unknown:
        raise ValueError(f"tasks {unknown} are not in {folder / 'truth.json'}; expected some of {sorted(truth['tasks'])}")
    model, tokenizer, planted = load_planted(folder / "model")
    model.to(device)  # the scores and the gradient methods run where the model is
    stratify = Design.from_dict(planted["recipe"]["design"]).stratify or None
    base = {"size": folder.name.rsplit("-s", 1)[0], "model": folder.name, "n_heads": HeadGeometry.of(model.config).total}
    rows = []
    for task, entry in truth["tasks"].items():
        if tasks and task not in tasks:
            continue
        scorer, sets = Scorer(model, tokenizer, folder / "model", task, stratify), task_truth(entry)
        for name in wanted:
            for budget, seed in runs_of(name, budgets, seeds):
                start = time.perf_counter()
                ranking, n_evals = ranking_of(name, scorer, budget, seed, sets["k"], sparsity=sparsity, alpha=alpha)
                rows.append({**base, "task": task, "method": name, "budget": budget, "seed": seed, "n_evals": n_evals,
                             "k": sets["k"], "certified": sets["certified"], **found(ranking[:sets["k"]], sets),
                             "top": "+".join(ranking[:sets["k"]]), "seconds": round(time.perf_counter() - start, 2)})
                LOG.info("%s %s %s budget %s seed %d: recall %.2f (%d evaluations, %.1f s)", folder.name, task, name,
                         budget, seed, rows[-1]["recall"], n_evals, rows[-1]["seconds"])
                if partial:
                    pd.DataFrame(rows).to_csv(partial, index=False)
    return pd.DataFrame(rows)


def report(table: pd.DataFrame, out: Path, sparsity: float) -> str:
    """Write ``recall.csv``, ``summary.md`` and ``recall.png`` under ``out``; return the summary."""
    summary = summarise(table)
    failing = table[~table["certified"].astype(bool)][["model", "task"]].drop_duplicates()
    text = (f"# Recall of the certified planted heads (gold log-probability, sparsity {sparsity:g})\n\n"
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
        import matplotlib.pyplot as plt

        figure = plot(summary)
        figure.savefig(out / "recall.png", dpi=120)
        plt.close(figure)
    return text


def plot(summary: pd.DataFrame):
    """Recall against evaluations, one panel per size (smallest first), a line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(dict.fromkeys(summary.sort_values("n_heads")["size"]))
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
            ax.errorbar(group["n_evals"].clip(lower=1), group["recall"], yerr=group["se"].fillna(0),
                        marker=method_of(method)[0].marker, color=colours[method], label=method, capsize=2)
        ax.set(xscale="log", ylim=(0, 1.05), xlabel="evaluations (masked forward passes of the task)",
               ylabel="recall of the role heads in the top k", title=f"{size} ({int(mine['n_heads'].iloc[0])} heads)")
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[0]:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    axes[0][-1].legend(handles.values(), handles.keys(), fontsize=7)
    fig.tight_layout()
    return fig
