"""Paper tables and figures from evaluation results: pure functions, no file writing.

Tables (:mod:`headloc.report.tables`) and figures (:mod:`headloc.report.figures`) take DataFrames
and return a DataFrame or a matplotlib Figure; :mod:`headloc.report.formats` turns a table into
Markdown, LaTeX or CSV text. The scripts in ``scripts/`` write the files.
"""

from headloc.report.figures import add_footer, figure2
from headloc.report.formats import format_cell, to_csv, to_latex, to_markdown
from headloc.report.tables import deltas, table2, table6, table10

__all__ = [
    "add_footer",
    "deltas",
    "figure2",
    "format_cell",
    "table2",
    "table6",
    "table10",
    "to_csv",
    "to_latex",
    "to_markdown",
]
