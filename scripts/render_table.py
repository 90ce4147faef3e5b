"""Render one paper table as Markdown, CSV and LaTeX (rule render_table)."""

import pandas as pd

from headloc import report
from headloc.io import log_to_file, write_text

log = log_to_file(snakemake.log[0])
evals = pd.read_csv(snakemake.input.evals, sep="\t")
recoveries = pd.read_csv(snakemake.input.recoveries, sep="\t")
k, gen_tasks = snakemake.params.top_k, snakemake.params.gen_tasks
builders = {
    "table2": (lambda: report.table2(evals, k=k, gen_tasks=gen_tasks),
               f"Table 2. Change in task score (Delta Task) and in the other tasks' mean (Delta Gen), percentage points, top {k} heads ablated"),
    "table6": (lambda: report.table6(evals, gen_tasks=gen_tasks),
               "Table 6. Score and degradation against the number of top heads ablated (BL = unablated)"),
    "table10": (lambda: report.table10(recoveries, k=k),
                f"Table 10. Recovered heads per task (top {k}, most damaging first)"),
}
name = snakemake.wildcards.table
build, title = builders[name]
table = build()
footer = f"made by rule render_table ({name}) with scripts/render_table.py from {snakemake.input.evals}"
write_text(snakemake.output.md, report.to_markdown(table, title=title, footer=footer))
write_text(snakemake.output.csv, report.to_csv(table))
write_text(snakemake.output.tex, report.to_latex(table, caption=title, footer=footer, label=f"tab:{name}"))
log.info("%s: %d rows", name, len(table))
