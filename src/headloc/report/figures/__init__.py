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

from headloc.report.figures.canvas import SPECS, add_caption, add_footer, no_data_figure
from headloc.report.figures.knowledge import figure3, figure4
from headloc.report.figures.comparison import methods_figure, methods_points
from headloc.report.figures.runs import figure1, figure2

PAPER_ORDER = ("fig1", "fig2", "fig3", "fig4", "methods")
if set(SPECS) != set(PAPER_ORDER):
    raise ImportError(f"the figure modules describe {sorted(SPECS)}; PAPER_ORDER lists {sorted(PAPER_ORDER)}")
FIGURES = {name: SPECS[name] for name in PAPER_ORDER}
"""Every paper figure by name, in paper order, each drawn next to its spec."""

__all__ = ["FIGURES", "add_caption", "add_footer", "figure1", "figure2", "figure3", "figure4", "methods_figure",
           "methods_points", "no_data_figure"]
