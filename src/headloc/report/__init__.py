"""Paper tables and figures from evaluation results: pure functions, no file writing.

Tables (:mod:`headloc.report.tables`) and figures (:mod:`headloc.report.figures`) take DataFrames
and return a DataFrame or a matplotlib Figure; :mod:`headloc.report.formats` turns a table into
Markdown, LaTeX or CSV text. The scripts in ``scripts/`` write the files. A legitimately empty
table carries ``attrs["note"]`` saying why; an empty figure shows a centred "no data" note.
"""

from headloc.report.figures import (
    add_footer,
    figure1,
    figure2,
    figure3,
    figure4,
    no_data_figure,
)
from headloc.report.formats import format_cell, to_csv, to_latex, to_markdown
from headloc.report.tables import (
    deltas,
    empty_table,
    table1,
    table2,
    table3,
    table4,
    table5,
    table6,
    table7,
    table8,
    table9,
    table10,
    tuning_table,
)

__all__ = [
    "add_footer",
    "deltas",
    "empty_table",
    "figure1",
    "figure2",
    "figure3",
    "figure4",
    "format_cell",
    "no_data_figure",
    "table1",
    "table2",
    "table3",
    "table4",
    "table5",
    "table6",
    "table7",
    "table8",
    "table9",
    "table10",
    "to_csv",
    "to_latex",
    "to_markdown",
    "tuning_table",
]
