"""The methods figure: Delta Task of each search's top k against the evaluations it spent, one point
per method and budget."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from headloc import methods
from headloc.report.frames import NO_TASK_RUNS
from headloc.report.figures.canvas import MUTED, add, add_footer, new_figure, no_data_figure, needs_methods
from headloc.report.spec import FigureSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def method_marker(method: str) -> str:
    """A method's marker in the methods figure (the registry's; a circle for one it does not know)."""
    known = methods.registry().get(method)
    return known.marker if known else "o"


def methods_points(evals: pd.DataFrame, recoveries: pd.DataFrame, k: int = 5, *,
                   gen_tasks: Iterable[str] | None = None) -> pd.DataFrame:
    """One point per (model, task, method, evaluations used): the mean Delta Task of the top ``k``
    over the searches there (a random method's repeats), their standard deviation and count.

    Examples
    --------
    >>> evals = pd.DataFrame({"model": "m", "task": "t", "method": "cs", "search": ["a"] * 4 + ["b"] * 4,
    ...     "higher_is_better": True, "k": [0, 0, 1, 1] * 2, "eval_task": ["t", "g"] * 4,
    ...     "score": [80.0, 70.0, 50.0, 69.0, 80.0, 70.0, 60.0, 70.0]})
    >>> recoveries = pd.DataFrame({"model": "m", "task": "t", "method": "cs", "search": ["a", "b"],
    ...                            "top_heads": ["L1H2", "L0H0"], "n_evals": [100, 100]})
    >>> methods_points(evals, recoveries)[["method", "n_evals", "delta_task", "spread", "runs"]]
      method  n_evals  delta_task  spread  runs
    0     cs      100       -25.0     5.0     2
    """
    from headloc.report.tables import table4  # the table's rows are the figure's points

    rows = table4(evals, recoveries, k=k, gen_tasks=gen_tasks)
    if rows.empty:
        return pd.DataFrame(columns=["model", "task", "method", "n_evals", "delta_task", "spread", "runs"])
    grouped = rows.groupby(["model", "task", "method", "n_evals"], sort=False)["delta_task"]
    out = grouped.agg(delta_task="mean", spread=lambda v: float(np.std(v)), runs="count").reset_index()
    return out


def methods_figure(evals: pd.DataFrame, recoveries: pd.DataFrame, k: int = 5, *,
                   gen_tasks: Iterable[str] | None = None, ncols: int = 3,
                   footer: str | None = None) -> Figure:
    """Delta Task of each method's top ``k`` against the evaluations it used (log x axis), one
    panel per (model, task), one point per method and budget; a random method's repeats give the
    mean and a +-1 standard deviation bar. Greedy's Delta Task is drawn across the panel as the
    reference the other methods try to reach with fewer evaluations; a method that spends no
    evaluation (a random draw), which has no place on a log axis, is drawn across the panel too, as a
    dotted line in its colour with its +-1 standard deviation shaded: the floor to beat.

    Examples
    --------
    >>> evals = pd.DataFrame({"model": "m", "task": "t", "method": ["cs"] * 4 + ["greedy"] * 4,
    ...     "higher_is_better": True, "search": ["a"] * 4 + ["g"] * 4, "k": [0, 0, 1, 1] * 2,
    ...     "eval_task": ["t", "g"] * 4,
    ...     "score": [80.0, 70.0, 50.0, 69.0, 80.0, 70.0, 40.0, 70.0]})
    >>> recoveries = pd.DataFrame({"model": "m", "task": "t", "method": ["cs", "greedy"],
    ...     "search": ["a", "g"], "top_heads": ["L1H2", "L0H0"], "n_evals": [100, 1341]})
    >>> fig = methods_figure(evals, recoveries)
    >>> ax = fig.axes[0]
    >>> ax.get_xscale(), [c.lines[0].get_xydata().tolist() for c in ax.containers]
    ('log', [[[100.0, -30.0]], [[1341.0, -40.0]]])
    """
    from matplotlib.ticker import NullFormatter, ScalarFormatter  # only where it draws (headloc.report.figures)

    points = methods_points(evals, recoveries, k=k, gen_tasks=gen_tasks)
    # a run without a recovery row or a finite Delta Task (e.g. a relative task whose baseline is 0)
    # has no place on a log axis
    points = points.dropna(subset=["n_evals", "delta_task"])
    free, points = points[points["n_evals"] <= 0], points[points["n_evals"] > 0]
    if points.empty:
        return no_data_figure(NO_TASK_RUNS, title=f"Methods: Delta Task of the top {k} against evaluations used",
                              footer=footer)
    panels = list(points.groupby(["model", "task"], sort=False))
    fig, axes = new_figure(len(panels), ncols, (4.2, 3.2))
    shown = list(dict.fromkeys([*points["method"], *free["method"]]))
    colors = {method: f"C{i % 10}" for i, method in enumerate(shown)}
    for ax, ((model, task), mine) in zip(axes, panels):
        for method, run in mine.groupby("method", sort=False):
            run = run.sort_values("n_evals")
            ax.errorbar(run["n_evals"], run["delta_task"], yerr=run["spread"].where(run["runs"] > 1),
                        fmt=method_marker(method), linestyle="-" if len(run) > 1 else "none",
                        color=colors[method], label=method, capsize=3, markersize=6, linewidth=1)
        greedy = mine[mine["method"] == methods.REFERENCE]
        if len(greedy):
            ax.axhline(float(greedy["delta_task"].iloc[0]), color=MUTED, linestyle="--", linewidth=0.8)
        for row in free[(free["model"] == model) & (free["task"] == task)].itertuples():
            ax.axhline(row.delta_task, color=colors[row.method], linestyle=":", linewidth=1.2,
                       label=f"{row.method} (no evaluations)")
            if row.runs > 1:
                ax.axhspan(row.delta_task - row.spread, row.delta_task + row.spread, color=colors[row.method],
                           alpha=0.12, linewidth=0)
        ax.axhline(0.0, color="0.8", linewidth=0.6)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())  # 10, 100, 1000 rather than 10^1 ...
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("evaluations used (masked-evaluation equivalents)")
        ax.set_ylabel(rf"$\Delta$ Task, top {k} (pp)")
        ax.set_title(f"{model} / {task}", fontsize=10)
        ax.grid(True, which="both", axis="x", color="0.92", linewidth=0.5)
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for ax in axes[1:]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.legend(list(seen.values()), list(seen), loc="outside right upper", fontsize=8, frameon=False)
    if footer:
        add_footer(fig, footer)
    return fig


add(FigureSpec(
    name="methods",
    about="Delta Task of each method's top k against the evaluations it used (log scale).",
    inputs=("evals_methods", "recoveries"),
    empty_note=NO_TASK_RUNS,
    caption="Methods: Delta Task of the top {k} against evaluations used",
    builder=lambda evals, recoveries, options, footer: methods_figure(
        evals, recoveries, k=options.top_k, gen_tasks=options.gen_tasks, footer=footer),
    needs=needs_methods,
))
