"""A search's per-head effect as a layers x heads heatmap (one ``recovery.json`` record).

Every search method writes ``coef`` (head name ``"L{layer}H{head}"`` -> effect, see
``scripts/recover_heads.py``); what the number means depends on the method (:func:`value_label`, from its registry entry).
A ``chg`` record that carries its gates (``g_minus``, ``g_plus``, see :func:`headloc.search.chg.chg`)
is drawn as two panels, G- (facilitation) and G+ (1 - interference), on a fixed 0-1 scale; every
other record is one panel of ``coef`` on a diverging colormap centred at 0 (red: the score drops
when the head is ablated). The top-k heads (``top_heads``) are outlined and numbered by rank; a
search that confirms heads alone (``confirmed``) and left some outlined ones unconfirmed says which,
with its ``warnings``, in the title (:mod:`headloc.report.heatmap_title`). The title and footer fit the
figure's width (:mod:`headloc.report.text_fit`): a title line too wide is broken at its clauses, then at
spaces, and a word wider than the figure (a long search id, a path) is drawn smaller; a title of more
lines than the figure has room for (a search's warnings) makes it taller.

Figures are built on an Agg canvas (never ``pyplot``), like :mod:`headloc.report.figures`.

Examples
--------
>>> record = {"model": "m", "task": "t", "search": "s", "method": "greedy1s", "n_layers": 2,
...           "n_heads": 2, "n_evals": 5, "top_heads": ["L1H0"],
...           "coef": {"L0H0": 0.0, "L0H1": -0.1, "L1H0": -0.5, "L1H1": 0.2}}
>>> head_grid(record).tolist()
[[0.0, -0.1], [-0.5, 0.2]]
>>> [panel.field for panel in panels(record)]
['coef']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib import colormaps
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from headloc import methods
from headloc.heads import format_head, parse_head
from headloc.report.heatmap_title import add_title_and_footer
from headloc.report.text_fit import fitted, renderer_of

#: CHG's gate panels: field, colorbar label.
GATE_PANELS = (
    ("g_minus", "G- (facilitation: 1 = head needed)"),
    ("g_plus", "G+ (1 - interference: 0 = head hurts)"),
)
REQUIRED = ("model", "task", "search", "method", "n_layers", "n_heads", "coef")
CELL_INCHES = (0.42, 0.26)  # width, height of one head's cell
AXIS_INCHES = 1.0  # a panel's tick and axis labels below and beside its cells
DPI = 120


@dataclass(frozen=True)
class Panel:
    """One heatmap: the record's field it draws, the colorbar label, and whether it is a gate."""

    field: str
    label: str
    gate: bool = False


def _check(record: Mapping) -> None:
    missing = [key for key in REQUIRED if key not in record]
    if missing:
        raise ValueError(f"recovery record lacks {', '.join(missing)}; a recovery.json has {', '.join(REQUIRED)}, ...")
    for key in ("n_layers", "n_heads"):
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"recovery record's {key} must be an integer >= 1, got {value!r}")


def head_grid(record: Mapping, field: str = "coef") -> np.ndarray:
    """``record[field]`` (head name -> value) as an ``[n_layers, n_heads]`` float array.

    A head whose value is None (a head the method did not score, e.g. a universal head greedy
    left out and never measured) is NaN, drawn as a gray cell. Raises ValueError naming the first
    head the field lacks, a head outside the model, or a bad head name, so a truncated or foreign
    record never draws as a plausible picture.
    """
    _check(record)
    if field not in record:
        raise ValueError(f"recovery record ({record['method']}) has no field {field!r}")
    values = record[field]
    n_layers, n_heads = int(record["n_layers"]), int(record["n_heads"])
    grid = np.full((n_layers, n_heads), np.nan)
    given = np.zeros((n_layers, n_heads), dtype=bool)
    for name, value in values.items():
        layer, head = parse_head(name)
        if layer >= n_layers or head >= n_heads:
            raise ValueError(f"{field} names head {name}, outside the model's {n_layers} layers x {n_heads} heads")
        given[layer, head] = True
        grid[layer, head] = np.nan if value is None else float(value)
    missing = [format_head(layer, head) for layer, head in zip(*np.nonzero(~given))]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"{field} of {record['model']}/{record['task']}/{record['search']} lacks head "
                         f"{missing[0]}{more}: expected every head of {n_layers} layers x {n_heads} heads")
    return grid


def panels(record: Mapping) -> list[Panel]:
    """The panels a record is drawn as: CHG's G- and G+ when it carries them, else ``coef``."""
    if all(field in record for field, _ in GATE_PANELS):
        return [Panel(field, label, gate=True) for field, label in GATE_PANELS]
    flipped = " (sign flipped: the metric is lower-is-better, red still hurts the task)"
    return [Panel("coef", value_label(record.get("method")) + (flipped if record.get("higher_is_better") is False
                                                                else ""))]


def value_label(method: str) -> str:
    """What a method's ``coef`` means (the colorbar's label): the registry's label, or a generic one
    for a method this headloc does not know (a record from another version)."""
    known = methods.registry().get(method)
    return known.label if known else f"per-head effect ({method})"


def figure_size(n_layers: int, n_heads: int, n_panels: int = 1) -> tuple[float, float]:
    """Inches: one cell per head, room for the title, axis labels and each panel's colorbar."""
    width = n_panels * (n_heads * CELL_INCHES[0] + 1.9) + 0.4
    height = n_layers * CELL_INCHES[1] + 1.6
    return max(width, 4.5), max(height, 3.0)


def _grow_for_texts(fig: Figure, n_layers: int) -> None:
    """A title of many lines (a search's warnings) would leave a small model's panels no height
    (constrained layout then gives up): the figure grows until its title and footer, the cells and
    the axis labels (AXIS_INCHES) all fit."""
    renderer = renderer_of(fig)
    texts = sum(text.get_window_extent(renderer).height for text in fig.texts) / fig.dpi
    width, height = fig.get_size_inches()
    needed = texts + n_layers * CELL_INCHES[1] + AXIS_INCHES
    if needed > height:
        fig.set_size_inches(width, needed)


def holds_zero(record: Mapping, name: str) -> bool:
    """Whether the head's 95 % interval (``interval`` in recovery.json) holds 0."""
    interval = (record.get("interval") or {}).get(name)
    return bool(interval) and interval[0] <= 0 <= interval[1]


def _norm(grid: np.ndarray, gate: bool) -> Normalize:
    if gate:
        return Normalize(vmin=0.0, vmax=1.0)
    finite = np.abs(grid[np.isfinite(grid)])
    bound = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    return TwoSlopeNorm(vcenter=0.0, vmin=-bound, vmax=bound)


def heatmap_figure(record: Mapping, *, top_k: int | None = None, footer: str | None = None) -> Figure:
    """The record's heatmap(s): layers down (layer 0 at the top), heads across.

    Parameters
    ----------
    record : mapping
        A ``recovery.json`` record (model, task, search, method, n_layers, n_heads, coef, ...).
    top_k : int, optional
        How many heads of ``ranking`` to outline and number; default: the record's ``top_heads``.
    footer : str, optional
        A small provenance line at the bottom.
    """
    _check(record)
    if top_k is None:
        chosen = list(record.get("top_heads", []))
    elif isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0, got {top_k!r}")
    else:
        chosen = list(record.get("ranking") or record.get("top_heads", []))[:top_k]
    n_layers, n_heads = int(record["n_layers"]), int(record["n_heads"])
    shown = panels(record)
    grids = [head_grid(record, panel.field) for panel in shown]
    positions = [parse_head(name) for name in chosen]
    for name, (layer, head) in zip(chosen, positions):
        if layer >= n_layers or head >= n_heads:
            raise ValueError(f"top head {name} is outside the model's {n_layers} layers x {n_heads} heads")

    fig = Figure(figsize=figure_size(n_layers, n_heads, len(shown)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    bars = []
    label_every = 1 if n_layers <= 40 else 2
    for ax, panel, grid in zip(axes, shown, grids):
        cmap = colormaps["viridis" if panel.gate else "RdBu"].with_extremes(bad="0.75")  # gray: no value
        image = ax.imshow(grid, cmap=cmap, norm=_norm(grid, panel.gate), aspect="auto", interpolation="nearest")
        ax.set_xticks(range(n_heads))
        ax.set_yticks(range(0, n_layers, label_every))
        ax.tick_params(labelsize=8, length=2)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(np.arange(-0.5, n_heads), minor=True)
        ax.set_yticks(np.arange(-0.5, n_layers), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
        if len(shown) > 1:
            ax.set_title(panel.label.split(" (")[0], fontsize=9)
        for rank, (name, (layer, head)) in enumerate(zip(chosen, positions), start=1):
            for edge, width in (("black", 2.4), ("white", 0.8)):  # visible on dark and light cells
                ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor=edge, linewidth=width))
            if holds_zero(record, name):  # its effect may be nothing: hatched
                ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.2",
                                       linewidth=0))
            ax.text(head, layer, str(rank), ha="center", va="center", fontsize=7, fontweight="bold",
                    color="black", bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.9, linewidth=0))
        bar = fig.colorbar(image, ax=ax, shrink=min(1.0, 0.4 + 0.05 * n_layers), pad=0.02)
        bar.set_label(panel.label, fontsize=8)
        bar.ax.tick_params(labelsize=7)
        bars.append(bar)
    gray = any(np.isnan(grid).any() for grid in grids)
    add_title_and_footer(fig, record, chosen, gray, footer)
    _grow_for_texts(fig, n_layers)
    fig.draw_without_rendering()  # lays the panels out: each colorbar's length is known
    for bar in bars:  # a label longer than its colorbar (a small model's) is broken into lines along it
        length = bar.ax.get_window_extent().height
        label, size = fitted(fig, bar.ax.yaxis.label.get_text(), 8, width=length)
        bar.set_label(label, fontsize=size)
    return fig


def save_heatmap(record: Mapping, path: str | Path, *, top_k: int | None = None, footer: str | None = None,
                 dpi: int = DPI, format: str | None = None) -> Path:
    """Draw :func:`heatmap_figure` and write it to ``path``; ``format`` defaults to the suffix's
    (``png`` when the suffix names no image format, e.g. a temporary file)."""
    path = Path(path)
    if format is None:
        suffix = path.suffix.lstrip(".").lower()
        format = suffix if suffix in ("png", "pdf", "svg", "jpg", "jpeg") else "png"
    fig = heatmap_figure(record, top_k=top_k, footer=footer)
    fig.savefig(path, format=format, dpi=dpi)
    return path


__all__ = ["GATE_PANELS", "Panel", "figure_size", "head_grid", "heatmap_figure", "value_label", "panels", "save_heatmap"]
