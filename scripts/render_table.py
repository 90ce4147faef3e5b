"""Render one paper table as Markdown, CSV, LaTeX and HTML (rule render_table).

The table is ``headloc.report.TABLES[wildcards.table]``; its named inputs are the collected
tables the spec reads (``evals_main``, ``recoveries``, ...) and ``params.options`` holds the
fields of ``headloc.report.ReportOptions``.
"""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import pandas as pd

from headloc import report
from headloc.io import log_to_file, write_text

log = log_to_file(snakemake.log[0])
name = snakemake.wildcards.table
if name not in report.TABLES:
    raise ValueError(f"unknown table {name!r}; known: {', '.join(report.TABLES)}")
spec = report.TABLES[name]
options = report.ReportOptions(**snakemake.params.options)
frames = {key: pd.read_csv(path, sep="\t") for key, path in snakemake.input.items()}
table = spec.build(frames, options)
title = spec.title(options)
sources = ", ".join(str(path) for path in snakemake.input)
footer = f"made by rule render_table ({name}) with scripts/render_table.py from {sources}"
write_text(snakemake.output.md, report.to_markdown(table, title=title, footer=footer))
write_text(snakemake.output.csv, report.to_csv(table))
write_text(snakemake.output.html, report.to_html(table, title=title, footer=footer))
latex = report.to_latex(table, caption=title, footer=footer, label=f"tab:{name}")
write_text(snakemake.output.tex, latex)
log.info("%s: %d rows %s", name, len(table), table.attrs.get("note", ""))
