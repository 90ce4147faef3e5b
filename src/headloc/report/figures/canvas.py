"""What every figure shares: the registry its spec joins, a figure of n panels on an Agg canvas,
its caption and footer kept inside it, the no-data figure, and the run a figure draws."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from headloc.report.capabilities import capability_map
from headloc.report.frames import NO_TASK_RUNS, task_runs
from headloc.report.spec import FigureSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure


FOOTER_HEIGHT_IN = 0.25
CAPTION_PAD_IN = 0.04  # between the figure's edge and its caption, and between the caption and the panels
CHANCE = 25.0  # percent: random choice among four options (MMLU, WMDP)
HIGHLIGHT = "C3"
MUTED = "0.6"
GEN_LABEL = "gen (mean)"

SPECS: dict[str, FigureSpec] = {}
"""Every figure's spec by name, as each module adds it next to its builder (headloc.report.figures
puts them in paper order)."""


def add(spec: FigureSpec) -> None:
    if spec.name in SPECS:
        raise ValueError(f"figure {spec.name!r} is described twice")
    SPECS[spec.name] = spec


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
    >>> from matplotlib.figure import Figure
    >>> fig = add_footer(Figure(), "made by rule r (s.py)")
    >>> fig.texts[-1].get_text()
    'made by rule r (s.py)'
    """
    from matplotlib.layout_engine import ConstrainedLayoutEngine, TightLayoutEngine  # matplotlib only where it draws (headloc.report.figures)

    from headloc.report.text_fit import FILL, fitted, shrink_to_fit

    shrink_to_fit(fig.text(0.5, 0.005, text, ha="center", va="bottom", fontsize=fitted(fig, text, 7, wrap=False)[1],
                           color="0.4"), fig.bbox.width * FILL)
    pad = min(FOOTER_HEIGHT_IN / fig.get_figheight(), 0.2)
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        keep_clear(fig, bottom=pad)
    elif isinstance(engine, TightLayoutEngine):
        engine.set(rect=(0, pad, 1, 1))  # (left, bottom, right, top)
    else:
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, pad + 0.08))
    return fig


def keep_clear(fig: Figure, *, top: float = 0.0, bottom: float = 0.0) -> None:
    """Lay a constrained-layout figure's panels out below ``top`` and above ``bottom`` (shares of its
    height: its caption, its footer), keeping what an earlier call kept clear."""
    kept = getattr(fig, "_headloc_clear", (0.0, 0.0))
    kept = (max(kept[0], top), max(kept[1], bottom))
    fig._headloc_clear = kept
    fig.get_layout_engine().set(rect=(0, kept[1], 1, 1 - kept[0] - kept[1]))  # left, bottom, width, height


def add_caption(fig: Figure, text: str, *, fontsize: float) -> Figure:
    """``text`` as the figure's title (a constrained-layout figure's), broken into lines that fit its
    width (a word wider than the figure shrinks the font: :func:`headloc.report.text_fit.fitted`), at
    the top of the figure with the panels, their titles and labels laid out below it.

    Constrained layout's own room for a title fell short of a wrapped one (the panel titles ran under
    its last line), so the room is measured here and kept clear.
    """
    from headloc.report.text_fit import FILL, fitted, renderer_of, shrink_to_fit  # matplotlib only where it draws (headloc.report.figures)

    lines, size = fitted(fig, text, fontsize)
    pad = CAPTION_PAD_IN / fig.get_figheight()
    title = shrink_to_fit(fig.suptitle(lines, fontsize=size, y=1 - pad, va="top"), fig.bbox.width * FILL)
    height = title.get_window_extent(renderer_of(fig)).height / fig.bbox.height
    keep_clear(fig, top=min(height + 2 * pad, 0.5))
    return fig


def new_figure(n_panels: int, ncols: int, size: tuple[float, float]):
    """A constrained-layout Figure on an Agg canvas with ``n_panels`` axes in a grid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # matplotlib only where it draws (headloc.report.figures)
    from matplotlib.figure import Figure

    ncols = max(1, min(ncols, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n_panels:]:
        fig.delaxes(ax)
    return fig, list(axes[:n_panels])


def no_data_figure(why: str, *, title: str | None = None, footer: str | None = None) -> Figure:
    """One empty axes with a centred ``"no data: <why>"`` note (for legitimately empty input).

    Examples
    --------
    >>> fig = no_data_figure("no knowledge heads in evals")
    >>> len(fig.axes), fig.axes[0].texts[0].get_text()
    (1, 'no data: no knowledge heads in evals')
    """
    fig, (ax,) = new_figure(1, 1, (5.0, 3.0))
    ax.text(0.5, 0.5, f"no data: {why}", ha="center", va="center", transform=ax.transAxes,
            fontsize=10, color="0.3", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)
    if footer:
        add_footer(fig, footer)
    return fig


def needs_knowledge(options, *, eval_tasks: bool) -> str | None:
    """What a knowledge figure lacks in the config: ``knowledge.tasks`` (the searched knowledge
    tasks, whose shared heads are the knowledge heads) and, with ``eval_tasks``, ``knowledge.eval_tasks``
    (the multiple-choice tasks Figure 3 shows against chance); None when both are set."""
    keys = [("knowledge.tasks", options.knowledge_tasks)]
    keys += [("knowledge.eval_tasks", options.knowledge_eval_tasks)] if eval_tasks else []
    empty = [key for key, value in keys if not value]
    if not empty:
        return None
    what = ("knowledge heads ablated on the knowledge multiple-choice tasks" if eval_tasks
            else "the heads of each searched knowledge task (WMDP in the paper)")
    return f"it shows {what} and this config sets no {' and no '.join(empty)} (docs/configuration.md)"


def needs_methods(options) -> str | None:
    """What the methods figure lacks: two or more search methods (``search.methods``)."""
    if len(options.methods) >= 2:
        return None
    ran = f"one, {options.methods[0]}" if options.methods else "none"
    return f"it compares search methods and this config searches with {ran} (search.methods): list two or more"


def pick_model(rows: pd.DataFrame, model: str | None, name: str) -> str:
    """``model`` checked against the models in ``rows``; the first one when None."""
    present = list(pd.unique(rows["model"]))
    if model is None:
        return present[0]
    if model not in present:
        raise ValueError(f"{name}: model {model!r} has no rows in evals; models present: "
                         f"{', '.join(map(str, present))}")
    return model


def select_run(evals, model, capability, method, name):
    """(model, capability, that model's task rows, task -> capability) or a no-data reason."""
    rows = task_runs(evals, method, name)
    if rows.empty:
        return NO_TASK_RUNS
    model = pick_model(rows, model, name)
    rows = rows[rows["model"] == model]
    mapping = capability_map(evals)
    searched = list(pd.unique(rows["task"]))
    caps = list(dict.fromkeys(mapping.get(task, task) for task in searched))
    if capability is None:
        capability = caps[0]
    elif capability not in caps:
        raise ValueError(f"{name}: model {model!r} has no searched task of capability "
                         f"{capability!r}; capabilities searched: {', '.join(map(str, caps))}")
    return model, capability, rows, mapping


def plot_run(ax, lines: dict, title: str) -> None:
    """One panel: one line per label (k on x, delta on y) and a dashed zero line."""
    from matplotlib.ticker import MaxNLocator  # matplotlib only where it draws (headloc.report.figures)

    markers = iter("osD^v<>px*")
    for label, series in lines.items():
        ax.plot(series.index, series.to_numpy(), marker=next(markers, "o"), label=label)
    ax.axhline(0, color="0.5", linewidth=0.8, linestyle="--")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("heads ablated")
    ax.set_ylabel(r"$\Delta$ (negative = worse)")  # shorter than a one-row panel is tall
