"""Figures 3 and 4: the knowledge heads, the knowledge tasks' and the other tasks' scores with them
ablated."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from headloc.report.delta import baselines, shared_heads, with_delta
from headloc.report.frames import (
    NO_KNOWLEDGE_HEADS, NO_KNOWLEDGE_TASKS, NO_TASK_RUNS, check_columns, check_knowledge_eval_tasks, task_runs
)
from headloc.report.figures.canvas import (
    CHANCE, MUTED, GEN_LABEL, add, add_footer, new_figure, no_data_figure, needs_knowledge, pick_model, plot_run
)
from headloc.report.spec import FigureSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figure3(
    evals: pd.DataFrame,
    knowledge_eval_tasks: Sequence[str] = (),
    *,
    gen_tasks: Iterable[str] | None = None,
    ncols: int = 2,
    footer: str | None = None,
) -> Figure:
    """Paper Figure 3: knowledge multiple-choice heads push MMLU and WMDP to chance.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame; ``kind == "knowledge"`` rows (one head per ``headset``).
    knowledge_eval_tasks : sequence of str
        The knowledge multiple-choice eval tasks (one bar group each).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into the ``gen (mean)`` group; default: every evaluated task that
        is not a knowledge eval task.
    ncols : int, default 2
        Panels per row.
    footer : str, optional
        Provenance line added with :func:`add_footer`.

    Returns
    -------
    Figure
        One axes per model with knowledge heads; per bar group (knowledge eval tasks, then
        ``gen (mean)``) one bar unablated and one per knowledge head ablated, and a dashed
        line at 25% (random chance). A "no data" figure when there are no knowledge heads.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "kind": "knowledge", "k": [0, 0, 0, 1, 1, 1],
    ...     "headset": ["none"] * 3 + ["L0H22"] * 3,
    ...     "eval_task": ["mmlu", "wmdp_bio", "boolq"] * 2,
    ...     "score": [46.0, 56.0, 70.0, 25.0, 26.0, 69.0]})
    >>> ax = figure3(evals, ["mmlu", "wmdp_bio"]).axes[0]
    >>> len(ax.patches), ax.lines[0].get_ydata()[0]
    (6, 25.0)
    """
    rows, pairs = shared_heads(evals, "knowledge")
    if not pairs:
        return no_data_figure(NO_KNOWLEDGE_HEADS, title="Figure 3", footer=footer)
    knowledge = list(knowledge_eval_tasks)
    present = check_knowledge_eval_tasks(evals, knowledge, "figure3")
    gen = [t for t in present if t not in knowledge and (gen_tasks is None or t in set(gen_tasks))]
    labels = knowledge + ([GEN_LABEL] if gen else [])
    base = baselines(evals)
    models = list(dict.fromkeys(model for model, _ in pairs))
    fig, axes = new_figure(len(models), ncols, (max(4.0, 1.1 * len(labels) + 1.5), 3.2))
    for ax, model in zip(axes, models):
        heads = [head for m, head in pairs if m == model]
        series = {"unablated": [base.loc[(model, t)] for t in knowledge]}
        if gen:
            series["unablated"].append(float(np.mean([base.loc[(model, t)] for t in gen])))
        for head in heads:
            mine = rows[(rows["model"] == model) & (rows["headset"] == head)]
            score = mine.groupby("eval_task")["score"].mean()
            series[f"{head} ablated"] = [score[t] for t in knowledge] + (
                [float(score[gen].mean())] if gen else [])
        x = np.arange(len(labels))
        width = 0.8 / len(series)
        for i, (label, values) in enumerate(series.items()):
            ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label,
                   color=MUTED if i == 0 else f"C{i - 1}")
        ax.axhline(CHANCE, color="0.2", linewidth=0.9, linestyle="--", label="chance (25%)")
        ax.set_xticks(x, labels, rotation=30, ha="right")
        ax.set_ylabel("score (%)")
        ax.set_title(f"{model}: knowledge MC heads", fontsize=9)
        ax.legend(fontsize=7)
    if footer:
        add_footer(fig, footer)
    return fig


add(FigureSpec(
    name="fig3",
    about="Knowledge multiple-choice heads ablated alone.",
    inputs=("evals_knowledge",),
    empty_note=NO_KNOWLEDGE_HEADS,
    caption="Figure 3",
    builder=lambda evals, options, footer: figure3(
        evals, options.knowledge_eval_tasks, gen_tasks=options.gen_tasks, footer=footer),
    needs=lambda options: needs_knowledge(options, eval_tasks=True),
))


def figure4(
    evals: pd.DataFrame,
    *,
    model: str | None = None,
    knowledge_tasks: Sequence[str] = (),
    method: str | None = None,
    ncols: int = 3,
    footer: str | None = None,
) -> Figure:
    """Paper Figure 4: WMDP localization, each knowledge task's heads ablated 0..K at a time.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (``kind == "task"`` rows).
    model : str, optional
        The model (default: the first with task searches).
    knowledge_tasks : sequence of str
        The searched knowledge tasks (WMDP bio, chem, cyber in the paper).
    method : str, optional
        The main method; default: the first search of each task, whatever its method.
    ncols : int, default 3
        Panels per row.
    footer : str, optional
        Provenance line added with :func:`add_footer`.

    Returns
    -------
    Figure
        One axes per knowledge task the model searched, titled ``"model / heads of task"``:
        one line per knowledge task evaluated (the change on it against the number of heads
        ablated) and a dashed zero line. A "no data" figure when no knowledge task is
        configured or searched.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "wmdp_bio", "method": "cs", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["wmdp_bio", "wmdp_chem"] * 2,
    ...     "score": [72.0, 53.0, 71.0, 52.0]})
    >>> ax = figure4(evals, knowledge_tasks=["wmdp_bio", "wmdp_chem"]).axes[0]
    >>> len(ax.lines), ax.lines[1].get_ydata().tolist()
    (3, [0.0, -1.0])
    """
    check_columns(evals, ["model", "task", "search", "k", "eval_task", "score"], "evals")
    knowledge = list(knowledge_tasks)
    if not knowledge:
        return no_data_figure(NO_KNOWLEDGE_TASKS, title="Figure 4", footer=footer)
    rows = task_runs(evals, method, "figure4")
    if rows.empty:
        return no_data_figure(NO_TASK_RUNS, title="Figure 4", footer=footer)
    model = pick_model(rows, model, "figure4")
    rows = rows[rows["model"] == model]
    searched = [t for t in knowledge if t in set(rows["task"])]
    if not searched:
        return no_data_figure(f"model {model} searched none of {', '.join(knowledge)}",
                              title="Figure 4", footer=footer)
    long = with_delta(rows, baselines(rows))
    fig, axes = new_figure(len(searched), ncols, (3.4, 2.8))
    for ax, task in zip(axes, searched):
        mine = long[long["task"] == task]
        mine = mine[mine["search"] == mine["search"].iloc[0]]
        lines = {}
        for other in knowledge:
            sel = mine[mine["eval_task"] == other]
            if len(sel):
                label = rf"$\Delta$ {other}" + (" (own)" if other == task else "")
                lines[label] = sel.groupby("k")["delta"].mean()
        plot_run(ax, lines, f"{model} / heads of {task} ({mine['method'].iloc[0]})")
        ax.legend(fontsize=7)
    if footer:
        add_footer(fig, footer)
    return fig


add(FigureSpec(
    name="fig4",
    about="Localization of the knowledge tasks (WMDP) in one model.",
    inputs=("evals_main",),
    empty_note=NO_KNOWLEDGE_TASKS,
    caption="Figure 4",
    builder=lambda evals, options, footer: figure4(
        evals, model=options.figure_model, knowledge_tasks=options.knowledge_tasks,
        method=options.method, footer=footer),
    needs=lambda options: needs_knowledge(options, eval_tasks=False),
))
