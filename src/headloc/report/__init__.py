"""Paper tables and figures from evaluation results: pure functions, no file writing.

Tables (:mod:`headloc.report.tables`) and figures (:mod:`headloc.report.figures`) take DataFrames
and return a DataFrame or a matplotlib Figure; both build on the shared tidy-frame helpers of
:mod:`headloc.report.frames` (every input check) and :mod:`headloc.report.delta` (baselines, deltas).
:mod:`headloc.report.formats` and :mod:`headloc.report.latex` turn a table into Markdown, LaTeX, HTML
or CSV text; the scripts in ``scripts/`` write the files. A legitimately empty table carries
``attrs["note"]`` saying why; an empty figure shows a centred "no data" note.

Each table and figure is described once, next to its builder (:mod:`headloc.report.spec`):
:data:`TABLES` and :data:`FIGURES` map its name to a spec with what it shows (``about``), the
collected tables it reads (``inputs``), its columns, its empty-case note, its title for a run's
:class:`ReportOptions` (:mod:`headloc.report.options`) and ``build(frames, options)``.

Examples
--------
>>> spec = TABLES["table10"]
>>> spec.inputs
('recoveries_main',)
>>> print(spec.title(ReportOptions(top_k=3, method="cs_stratified")))
Table 10. Top 3 heads per model and task (method cs_stratified, most damaging first)
"""

from headloc.collected import COLLECTIONS
from headloc.report.figures import (
    FIGURES,
    add_footer,
    figure1,
    figure2,
    figure3,
    figure4,
    methods_figure,
    no_data_figure,
)
from headloc.report.delta import baselines, deltas
from headloc.report.formats import format_cell, to_csv, to_html, to_markdown
from headloc.report.frames import empty_table
from headloc.report.latex import to_latex
from headloc.report.options import ReportOptions
from headloc.report.spec import FigureSpec, TableSpec
from headloc.report.tables import (
    TABLES,
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
    "FIGURES",
    "TABLES",
    "FigureSpec",
    "ReportOptions",
    "TableSpec",
    "add_footer",
    "baselines",
    "deltas",
    "empty_table",
    "figure1",
    "figure2",
    "figure3",
    "figure4",
    "format_cell",
    "methods_figure",
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
    "target_table",
    "to_csv",
    "to_html",
    "to_latex",
    "to_markdown",
    "tuning_table",
]


def target_table() -> str:
    """The Markdown table of every table and figure target (docs/targets.md holds it verbatim):
    what it shows, which collected tables it reads and what it makes the workflow run."""
    lines = ["| target | what it shows | reads | runs |", "|---|---|---|---|"]
    for name, spec in {**TABLES, **FIGURES}.items():
        reads = ", ".join(f"`{key}`" for key in spec.inputs)
        runs = "; ".join(dict.fromkeys(COLLECTIONS[key].runs for key in spec.inputs))
        lines.append(f"| `{name}` | {spec.about} | {reads} | {runs} |")
    return "\n".join(lines) + "\n"
