"""Text that fits a figure's width: a line too wide is broken at its clauses, then at spaces, and a
word wider than the figure (a long search id, a path) is drawn smaller.

The heatmap (:mod:`headloc.report.heatmap`) and the paper figures' captions and footers
(:mod:`headloc.report.figures.canvas`) fit their text with this one measure, so it belongs to neither.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

FILL = 0.96  # the share of the figure's width a line of text may take (the rest: a margin each side)


def renderer_of(fig: Figure):
    """``fig``'s renderer, measuring texts as they will be drawn; a bare ``Figure()`` (no canvas of
    its own) gets matplotlib's raster one, the canvas ``savefig`` draws with."""
    if not hasattr(fig.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    return fig.canvas.get_renderer()


def shrink_to_fit(text, width: float):
    """Draw ``text`` (a Text of a figure) smaller until its drawn extent is at most ``width`` pixels
    wide: at small sizes the drawn width strays from the width measured for the font size. Returns it."""
    renderer = renderer_of(text.get_figure(root=True))
    for _ in range(10):
        drawn = text.get_window_extent(renderer).width
        if drawn <= width:
            break
        text.set_fontsize(text.get_fontsize() * width / drawn * 0.98)
    return text


def fitted(fig: Figure, text: str, size: float, *, wrap: bool = True, width: float | None = None) -> tuple[str, float]:
    """``text`` and a font size at which each of its lines fits the figure's width (:data:`FILL`), or
    ``width`` pixels (a colorbar's length).

    With ``wrap``, a line too wide is first broken after its clauses ("; "), then a clause still too
    wide at its spaces; text that fits stays as it is. If a line is still too wide (one word wider
    than the figure: a long search id or path), the size shrinks until it fits.
    """
    renderer = renderer_of(fig)
    width = fig.bbox.width * FILL if width is None else width

    def measure(line: str) -> float:
        return renderer.get_text_width_height_descent(line, FontProperties(size=size), ismath=False)[0]

    lines = text.split("\n")
    if wrap:
        lines = [piece for line in lines for clause in _packed(line.split("; "), "; ", width, measure)
                 for piece in (_packed(clause.split(" "), " ", width, measure) if measure(clause) > width
                               else [clause])]
    widest = max(measure(line) for line in lines)
    return "\n".join(lines), size if widest <= width else size * width / widest


def _packed(pieces: list[str], joiner: str, width: float, measure) -> list[str]:
    """``pieces`` joined by ``joiner`` into as few lines as fit ``width`` (a line breaks after the joiner)."""
    lines, current = [], pieces[0]
    for piece in pieces[1:]:
        if measure(current + joiner + piece) <= width:
            current += joiner + piece
        else:
            lines.append(current + joiner.rstrip())
            current = piece
    return [*lines, current]
