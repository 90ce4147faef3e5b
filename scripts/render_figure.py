"""Render one paper figure as PNG and PDF (rule render_figure).

The figure is ``headloc.report.FIGURES[wildcards.figure]``; its named inputs are the collected
tables the spec reads (``evals_main``, ...) and ``params.options`` holds the fields of
``headloc.report.ReportOptions``.
"""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import pandas as pd

from headloc import report
from headloc.io import atomic_path, log_to_file

log = log_to_file(snakemake.log[0])
name = snakemake.wildcards.figure
if name not in report.FIGURES:
    raise ValueError(f"unknown figure {name!r}; known: {', '.join(report.FIGURES)}")
spec = report.FIGURES[name]
options = report.ReportOptions(**snakemake.params.options)
frames = {key: pd.read_csv(path, sep="\t") for key, path in snakemake.input.items()}
footer = f"made by rule render_figure ({name}) with scripts/render_figure.py"
figure = spec.build(frames, options, footer=footer)
for path in (snakemake.output.png, snakemake.output.pdf):
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format=path.rsplit(".", 1)[1], dpi=150, bbox_inches="tight")
log.info("%s with %d panels", name, len(figure.axes))
