"""The paper's figures as matplotlib Figures (Figures 1-4), each with its
:class:`~headloc.report.spec.FigureSpec` next to it, collected in :data:`FIGURES`.

Figures are built with :class:`matplotlib.figure.Figure` on an Agg canvas, never through
``pyplot``: nothing is shown, no global figure registry fills up, and the code runs headless
whatever backend the caller has configured. Saving is the caller's job (``fig.savefig``).
matplotlib is imported by the functions that draw, not with the module: the Snakefile and the
table jobs read :data:`FIGURES` without drawing (matplotlib takes 0.3-1 s to import).

Input is the long evaluations frame described in :mod:`headloc.report.frames`. A figure whose
run's config cannot fill it (no knowledge tasks for Figures 3 and 4, one search method for the
methods figure) is not drawn by the workflow: its spec's ``needs`` say what the config lacks
(:meth:`~headloc.report.spec.FigureSpec.unfilled`). When a drawn figure's input is still empty (no
knowledge heads shared by the knowledge tasks, no task searches yet) the figure is a single axes
with a centred ``"no data: <why>"`` note instead of an error. Malformed input (missing columns or
baselines, a model or capability the data does not have) raises ValueError.

Every text fits the figure at its size: a caption or footer wider than the figure is broken into
lines or drawn smaller (:func:`add_caption`, :func:`add_footer`; tests/unit/test_figure_text.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from headloc import methods
from headloc.report.frames import (
    NO_KNOWLEDGE_HEADS,
    NO_KNOWLEDGE_TASKS,
    NO_TASK_RUNS,
    baselines,
    capability_map,
    check_columns,
    check_k,
    check_knowledge_eval_tasks,
    deltas,
    shared_heads,
    task_runs,
    with_delta,
)
from headloc.report.spec import FigureSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FOOTER_HEIGHT_IN = 0.25
CAPTION_PAD_IN = 0.04  # between the figure's edge and its caption, and between the caption and the panels
CHANCE = 25.0  # percent: random choice among four options (MMLU, WMDP)
HIGHLIGHT = "C3"
MUTED = "0.6"
GEN_LABEL = "gen (mean)"

FIGURES: dict[str, FigureSpec] = {}
"""Every paper figure by name, in paper order; each added next to its builder."""


def _add(spec: FigureSpec) -> None:
    if spec.name in FIGURES:
        raise ValueError(f"figure {spec.name!r} is described twice")
    FIGURES[spec.name] = spec


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
    from matplotlib.layout_engine import ConstrainedLayoutEngine, TightLayoutEngine  # see the module docstring

    from headloc.report.heatmap import FILL, fitted, shrink_to_fit

    shrink_to_fit(fig.text(0.5, 0.005, text, ha="center", va="bottom", fontsize=fitted(fig, text, 7, wrap=False)[1],
                           color="0.4"), fig.bbox.width * FILL)
    pad = min(FOOTER_HEIGHT_IN / fig.get_figheight(), 0.2)
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        _keep_clear(fig, bottom=pad)
    elif isinstance(engine, TightLayoutEngine):
        engine.set(rect=(0, pad, 1, 1))  # (left, bottom, right, top)
    else:
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, pad + 0.08))
    return fig


def _keep_clear(fig: Figure, *, top: float = 0.0, bottom: float = 0.0) -> None:
    """Lay a constrained-layout figure's panels out below ``top`` and above ``bottom`` (shares of its
    height: its caption, its footer), keeping what an earlier call kept clear."""
    kept = getattr(fig, "_headloc_clear", (0.0, 0.0))
    kept = (max(kept[0], top), max(kept[1], bottom))
    fig._headloc_clear = kept
    fig.get_layout_engine().set(rect=(0, kept[1], 1, 1 - kept[0] - kept[1]))  # left, bottom, width, height


def add_caption(fig: Figure, text: str, *, fontsize: float) -> Figure:
    """``text`` as the figure's title (a constrained-layout figure's), broken into lines that fit its
    width (a word wider than the figure shrinks the font: :func:`headloc.report.heatmap.fitted`), at
    the top of the figure with the panels, their titles and labels laid out below it.

    Constrained layout's own room for a title fell short of a wrapped one (the panel titles ran under
    its last line), so the room is measured here and kept clear.
    """
    from headloc.report.heatmap import FILL, fitted, renderer_of, shrink_to_fit  # matplotlib: see the module docstring

    lines, size = fitted(fig, text, fontsize)
    pad = CAPTION_PAD_IN / fig.get_figheight()
    title = shrink_to_fit(fig.suptitle(lines, fontsize=size, y=1 - pad, va="top"), fig.bbox.width * FILL)
    height = title.get_window_extent(renderer_of(fig)).height / fig.bbox.height
    _keep_clear(fig, top=min(height + 2 * pad, 0.5))
    return fig


def _figure(n_panels: int, ncols: int, size: tuple[float, float]):
    """A constrained-layout Figure on an Agg canvas with ``n_panels`` axes in a grid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # see the module docstring
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
    fig, (ax,) = _figure(1, 1, (5.0, 3.0))
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


def _pick_model(rows: pd.DataFrame, model: str | None, name: str) -> str:
    """``model`` checked against the models in ``rows``; the first one when None."""
    present = list(pd.unique(rows["model"]))
    if model is None:
        return present[0]
    if model not in present:
        raise ValueError(f"{name}: model {model!r} has no rows in evals; models present: "
                         f"{', '.join(map(str, present))}")
    return model


def _select(evals, model, capability, method, name):
    """(model, capability, that model's task rows, task -> capability) or a no-data reason."""
    rows = task_runs(evals, method, name)
    if rows.empty:
        return NO_TASK_RUNS
    model = _pick_model(rows, model, name)
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
    picked = _select(evals, model, capability, method, "figure1")
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

    fig, (ax,) = _figure(1, 1, (max(5.0, 0.75 * len(labels) + 1.5), 3.4))
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


_add(FigureSpec(
    name="fig1",
    about="Every task's score with the top-k heads of one capability ablated.",
    inputs=("evals_main",),
    empty_note=NO_TASK_RUNS,
    caption="Figure 1",
    builder=lambda evals, options, footer: figure1(
        evals, model=options.figure_model, capability=options.figure_capability,
        k=options.top_k, gen_tasks=options.gen_tasks, method=options.method, footer=footer),
))


def _plot_run(ax, lines: dict, title: str) -> None:
    """One panel: one line per label (k on x, delta on y) and a dashed zero line."""
    from matplotlib.ticker import MaxNLocator  # see the module docstring

    markers = iter("osD^v<>px*")
    for label, series in lines.items():
        ax.plot(series.index, series.to_numpy(), marker=next(markers, "o"), label=label)
    ax.axhline(0, color="0.5", linewidth=0.8, linestyle="--")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("heads ablated")
    ax.set_ylabel(r"$\Delta$ (negative = worse)")  # shorter than a one-row panel is tall


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
        its own legend. Every change is oriented (:func:`headloc.report.frames.with_delta`):
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
    picked = _select(evals, model, capability, method, "figure2")
    if isinstance(picked, str):
        return no_data_figure(picked, title="Figure 2", footer=footer)
    model, capability, rows, mapping = picked
    rows = rows[[mapping.get(t, t) == capability for t in rows["task"]]]
    d = deltas(rows, gen_tasks=gen_tasks)
    long = with_delta(rows, baselines(rows))
    runs = list(d.groupby(["task", "search"], sort=False))
    fig, axes = _figure(len(runs), ncols, (3.4, 2.8))
    for ax, ((task, search), run) in zip(axes, runs):
        mine = long[(long["task"] == task) & (long["search"] == search)]
        lines = {rf"$\Delta$ {task} (own)": run.set_index("k")["delta_task"]}
        for other in pd.unique(mine["eval_task"]):
            if other != task and mapping.get(other, other) == capability:
                sel = mine[mine["eval_task"] == other]
                lines[rf"$\Delta$ {other}"] = sel.groupby("k")["delta"].mean()
        lines[r"$\Delta$ Gen"] = run.set_index("k")["delta_gen"]
        _plot_run(ax, lines, f"{model} / {task} ({run['method'].iloc[0]})")
        ax.legend(fontsize=7)  # every panel: its own task's line comes first
    if note:
        add_caption(fig, note, fontsize=7)
    if footer:
        add_footer(fig, footer)
    return fig


_add(FigureSpec(
    name="fig2",
    about="Degradation against the number of heads ablated, for one capability.",
    inputs=("evals_main",),
    empty_note=NO_TASK_RUNS,
    caption="Figure 2",
    builder=lambda evals, options, footer: figure2(
        evals, model=options.figure_model, capability=options.figure_capability,
        gen_tasks=options.gen_tasks, method=options.method, footer=footer, note=options.delta_note()),
))


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
    fig, axes = _figure(len(models), ncols, (max(4.0, 1.1 * len(labels) + 1.5), 3.2))
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


_add(FigureSpec(
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
    model = _pick_model(rows, model, "figure4")
    rows = rows[rows["model"] == model]
    searched = [t for t in knowledge if t in set(rows["task"])]
    if not searched:
        return no_data_figure(f"model {model} searched none of {', '.join(knowledge)}",
                              title="Figure 4", footer=footer)
    long = with_delta(rows, baselines(rows))
    fig, axes = _figure(len(searched), ncols, (3.4, 2.8))
    for ax, task in zip(axes, searched):
        mine = long[long["task"] == task]
        mine = mine[mine["search"] == mine["search"].iloc[0]]
        lines = {}
        for other in knowledge:
            sel = mine[mine["eval_task"] == other]
            if len(sel):
                label = rf"$\Delta$ {other}" + (" (own)" if other == task else "")
                lines[label] = sel.groupby("k")["delta"].mean()
        _plot_run(ax, lines, f"{model} / heads of {task} ({mine['method'].iloc[0]})")
        ax.legend(fontsize=7)
    if footer:
        add_footer(fig, footer)
    return fig


_add(FigureSpec(
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
    from matplotlib.ticker import NullFormatter, ScalarFormatter  # see the module docstring

    points = methods_points(evals, recoveries, k=k, gen_tasks=gen_tasks)
    # a run without a recovery row or a finite Delta Task (e.g. a relative task whose baseline is 0)
    # has no place on a log axis
    points = points.dropna(subset=["n_evals", "delta_task"])
    free, points = points[points["n_evals"] <= 0], points[points["n_evals"] > 0]
    if points.empty:
        return no_data_figure(NO_TASK_RUNS, title=f"Methods: Delta Task of the top {k} against evaluations used",
                              footer=footer)
    panels = list(points.groupby(["model", "task"], sort=False))
    fig, axes = _figure(len(panels), ncols, (4.2, 3.2))
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


_add(FigureSpec(
    name="methods",
    about="Delta Task of each method's top k against the evaluations it used (log scale).",
    inputs=("evals_methods", "recoveries"),
    empty_note=NO_TASK_RUNS,
    caption="Methods: Delta Task of the top {k} against evaluations used",
    builder=lambda evals, recoveries, options, footer: methods_figure(
        evals, recoveries, k=options.top_k, gen_tasks=options.gen_tasks, footer=footer),
    needs=needs_methods,
))
