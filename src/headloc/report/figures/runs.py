"""Figures 1 and 2: every task's score with the top-k heads of one capability ablated, and each
run's Delta Task and Delta Gen as more heads are ablated."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from headloc.report.delta import baselines, deltas, with_delta
from headloc.report.frames import NO_TASK_RUNS, check_k
from headloc.report.figures.canvas import (
    HIGHLIGHT, MUTED, GEN_LABEL, add, add_footer, add_caption, new_figure, no_data_figure, plot_run, select_run
)
from headloc.report.spec import FigureSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figure1(
    evals: pd.DataFrame,
    *,
    model: str | None = None,
    capability: str | None = None,
    k: int = 5,
    gen_tasks: Iterable[str] | None = None,
    method: str | None = None,
    footer: str | None = None,
) -> Figure:
    """Paper Figure 1: every eval task's score unablated and with one task's top-k heads ablated.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :mod:`headloc.report.frames`).
    model : str, optional
        The model (default: the first with task searches).
    capability : str, optional
        The capability; its first searched task (of ``method``) supplies the heads (default:
        the capability of the model's first searched task).
    k : int, default 5
        Heads ablated (the run's largest k if it evaluated fewer).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into the ``gen (mean)`` bar pair; default: every eval task other
        than the searched one.
    method : str, optional
        The main method; default: the first search of the task, whatever its method.
    footer : str, optional
        Provenance line added with :func:`add_footer`.

    Returns
    -------
    Figure
        One axes with two bars per eval task plus a ``gen (mean)`` pair: unablated (grey) and
        ablated (coloured; red for the tasks of ``capability``, whose tick labels are bold).
        A "no data" figure when ``evals`` has no task searches.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "method": "cs", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> ax = figure1(evals).axes[0]
    >>> len(ax.patches), [t.get_text() for t in ax.get_xticklabels()]
    (6, ['gsm8k', 'boolq', 'gen (mean)'])
    """
    check_k(k)
    picked = select_run(evals, model, capability, method, "figure1")
    if isinstance(picked, str):
        return no_data_figure(picked, title="Figure 1", footer=footer)
    model, capability, rows, mapping = picked
    task = next(t for t in pd.unique(rows["task"]) if mapping.get(t, t) == capability)
    run = rows[rows["task"] == task]
    run = run[run["search"] == run["search"].iloc[0]]
    k_used = int(min(k, run["k"].max()))
    base = baselines(rows)
    with_delta(run, base)  # raises naming a missing baseline
    ablated = run[run["k"] == k_used].groupby("eval_task", sort=False)["score"].mean()
    eval_tasks = list(ablated.index)
    before = [base.loc[(model, t)] for t in eval_tasks]
    after = list(ablated.to_numpy())
    gen = [t for t in eval_tasks if t != task and (gen_tasks is None or t in set(gen_tasks))]
    if gen:
        before.append(float(np.mean([base.loc[(model, t)] for t in gen])))
        after.append(float(ablated[gen].mean()))
    labels = eval_tasks + ([GEN_LABEL] if gen else [])
    mine = [mapping.get(t, t) == capability for t in eval_tasks] + [False] * bool(gen)

    fig, (ax,) = new_figure(1, 1, (max(5.0, 0.75 * len(labels) + 1.5), 3.4))
    x = np.arange(len(labels))
    width = 0.38
    ax.bar(x - width / 2, before, width, color=MUTED, label="unablated")
    ax.bar(x + width / 2, after, width, color=[HIGHLIGHT if m else "C0" for m in mine],
           label=f"top {k_used} {task} heads ablated")
    ax.set_xticks(x, labels, rotation=30, ha="right")
    for label, highlighted in zip(ax.get_xticklabels(), mine):
        if highlighted:
            label.set_fontweight("bold")
            label.set_color(HIGHLIGHT)
    ax.set_ylabel("score (%)")
    ax.set_title(f"{model}: top {k_used} {task} heads ({run['method'].iloc[0]}) ablated",
                 fontsize=9)
    ax.legend(fontsize=8)
    if footer:
        add_footer(fig, footer)
    return fig


add(FigureSpec(
    name="fig1",
    about="Every task's score with the top-k heads of one capability ablated.",
    inputs=("evals_main",),
    empty_note=NO_TASK_RUNS,
    caption="Figure 1",
    builder=lambda evals, options, footer: figure1(
        evals, model=options.figure_model, capability=options.figure_capability,
        k=options.top_k, gen_tasks=options.gen_tasks, method=options.method, footer=footer),
))


def figure2(
    evals: pd.DataFrame,
    *,
    model: str | None = None,
    capability: str | None = None,
    gen_tasks: Iterable[str] | None = None,
    method: str | None = None,
    ncols: int = 3,
    footer: str | None = None,
    note: str | None = None,
) -> Figure:
    """Paper Figure 2: deltas as more top heads are ablated, one panel per searched task.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`headloc.report.deltas`).
    model : str, optional
        The model (default: the first with task searches).
    capability : str, optional
        Plot the searches of this capability's tasks (default: the capability of the model's
        first searched task).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen. Default: every eval task other than the run's own.
    method : str, optional
        The main method; default: every method.
    ncols : int, default 3
        Panels per row of the grid.
    footer : str, optional
        Provenance line added with :func:`add_footer`.
    note : str, optional
        How the deltas read (:meth:`headloc.report.ReportOptions.delta_note`), the figure's title.

    Returns
    -------
    Figure
        One axes per (task, search) of the capability, titled ``"model / task (method)"``.
        Each holds the change on its own task, on each other eval task of the capability
        (e.g. Arithmetic under GSM8K heads), Delta Gen, and a dashed zero line; each panel has
        its own legend. Every change is oriented (:func:`headloc.report.delta.with_delta`):
        below zero is worse. A "no data" figure when ``evals`` has no task searches.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> fig = figure2(evals)
    >>> len(fig.axes), len(fig.axes[0].lines)
    (1, 3)
    """
    picked = select_run(evals, model, capability, method, "figure2")
    if isinstance(picked, str):
        return no_data_figure(picked, title="Figure 2", footer=footer)
    model, capability, rows, mapping = picked
    rows = rows[[mapping.get(t, t) == capability for t in rows["task"]]]
    d = deltas(rows, gen_tasks=gen_tasks)
    long = with_delta(rows, baselines(rows))
    runs = list(d.groupby(["task", "search"], sort=False))
    fig, axes = new_figure(len(runs), ncols, (3.4, 2.8))
    for ax, ((task, search), run) in zip(axes, runs):
        mine = long[(long["task"] == task) & (long["search"] == search)]
        lines = {rf"$\Delta$ {task} (own)": run.set_index("k")["delta_task"]}
        for other in pd.unique(mine["eval_task"]):
            if other != task and mapping.get(other, other) == capability:
                sel = mine[mine["eval_task"] == other]
                lines[rf"$\Delta$ {other}"] = sel.groupby("k")["delta"].mean()
        lines[r"$\Delta$ Gen"] = run.set_index("k")["delta_gen"]
        plot_run(ax, lines, f"{model} / {task} ({run['method'].iloc[0]})")
        ax.legend(fontsize=7)  # every panel: its own task's line comes first
    if note:
        add_caption(fig, note, fontsize=7)
    if footer:
        add_footer(fig, footer)
    return fig


add(FigureSpec(
    name="fig2",
    about="Degradation against the number of heads ablated, for one capability.",
    inputs=("evals_main",),
    empty_note=NO_TASK_RUNS,
    caption="Figure 2",
    builder=lambda evals, options, footer: figure2(
        evals, model=options.figure_model, capability=options.figure_capability,
        gen_tasks=options.gen_tasks, method=options.method, footer=footer, note=options.delta_note()),
))
