"""Render one paper figure as PNG and PDF (rule render_figure)."""

import pandas as pd

from headloc import report
from headloc.io import atomic_path, log_to_file

log = log_to_file(snakemake.log[0])
evals = pd.read_csv(snakemake.input.evals, sep="\t")
footer = "made by rule render_figure (fig2) with scripts/render_figure.py"
figure = report.figure2(evals, gen_tasks=snakemake.params.gen_tasks, footer=footer)
for path in (snakemake.output.png, snakemake.output.pdf):
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format=path.rsplit(".", 1)[1], dpi=150, bbox_inches="tight")
log.info("figure with %d panels", len(figure.axes))
