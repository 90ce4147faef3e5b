"""The paper's figures as matplotlib Figures (Figure 2: deltas against heads ablated).

Figures are built with :class:`matplotlib.figure.Figure` on an Agg canvas, never through
``pyplot``: nothing is shown, no global figure registry fills up, and the code runs headless
whatever backend the caller has configured. Saving is the caller's job (``fig.savefig``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine, TightLayoutEngine
from matplotlib.ticker import MaxNLocator

from headloc.report.tables import deltas

FOOTER_HEIGHT_IN = 0.25


def add_footer(fig: Figure, text: str) -> Figure:
    """Put a small provenance line at the bottom of ``fig`` and keep the axes clear of it.

    Parameters
    ----------
    fig : Figure
        The figure to annotate (changed in place).
    text : str
        E.g. ``"made by rule render_figure2 (scripts/render_figure.py)"``.

    Returns
    -------
    Figure
        ``fig`` itself, for chaining.

    Examples
    --------
    >>> fig = add_footer(Figure(), "made by rule r (s.py)")
    >>> fig.texts[-1].get_text()
    'made by rule r (s.py)'
    """
    fig.text(0.5, 0.005, text, ha="center", va="bottom", fontsize=7, color="0.4")
    pad = min(FOOTER_HEIGHT_IN / fig.get_figheight(), 0.2)
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(0, pad, 1, 1 - pad))  # (left, bottom, width, height)
    elif isinstance(engine, TightLayoutEngine):
        engine.set(rect=(0, pad, 1, 1))  # (left, bottom, right, top)
    else:
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, pad + 0.08))
    return fig


def _plot_run(ax, run: pd.DataFrame, title: str) -> None:
    """One panel: Delta Task and Delta Gen against the number of heads ablated."""
    ax.plot(run["k"], run["delta_task"], marker="o", label=r"$\Delta$ Task")
    ax.plot(run["k"], run["delta_gen"], marker="s", label=r"$\Delta$ Gen")
    ax.axhline(0, color="0.5", linewidth=0.8, linestyle="--")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("heads ablated")
    ax.set_ylabel(r"$\Delta$ vs. baseline (pp)")


def figure2(
    evals: pd.DataFrame,
    *,
    gen_tasks: Iterable[str] | None = None,
    ncols: int = 3,
    footer: str | None = None,
) -> Figure:
    """Paper Figure 2: Delta Task and Delta Gen as more top heads are ablated, one panel per run.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`headloc.report.deltas`).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen. Default: every eval task other than the run's own.
    ncols : int, default 3
        Panels per row of the grid.
    footer : str, optional
        Provenance line added with :func:`add_footer`.

    Returns
    -------
    Figure
        One axes per (model, task, search), titled ``"model / task (method)"``, ordered by
        task then model; each holds a Delta Task line, a Delta Gen line and a dashed zero line.
        The legend is on the first panel.

    Raises
    ------
    ValueError
        If ``evals`` has no rows, or as :func:`headloc.report.deltas` does.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> fig = figure2(evals)
    >>> len(fig.axes), len(fig.axes[0].lines)
    (1, 3)
    """
    runs = list(deltas(evals, gen_tasks=gen_tasks).groupby(["model", "task", "search"], sort=False))
    if not runs:
        raise ValueError("evals has no rows to plot")
    ncols = max(1, min(ncols, len(runs)))
    nrows = math.ceil(len(runs) / ncols)
    fig = Figure(figsize=(3.4 * ncols, 2.8 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, ((model, task, search), run) in zip(axes, runs):
        _plot_run(ax, run, f"{model} / {task} ({run['method'].iloc[0]})")
    for ax in axes[len(runs):]:
        fig.delaxes(ax)
    axes[0].legend(fontsize=8)
    if footer:
        add_footer(fig, footer)
    return fig
