"""Render one paper figure as PNG and PDF (rule render_figure)."""

import pandas as pd

from headloc import report
from headloc.io import atomic_path, log_to_file

log = log_to_file(snakemake.log[0])
evals = pd.read_csv(snakemake.input.evals, sep="\t")
params = snakemake.params
k = params.get("top_k", 5)
gen_tasks = params.get("gen_tasks")
method = params.get("method")
model = params.get("figure_model")
capability = params.get("figure_capability")
name = snakemake.wildcards.figure
footer = f"made by rule render_figure ({name}) with scripts/render_figure.py"
builders = {
    "fig1": lambda: report.figure1(evals, model=model, capability=capability, k=k,
                                   gen_tasks=gen_tasks, method=method, footer=footer),
    "fig2": lambda: report.figure2(evals, model=model, capability=capability,
                                   gen_tasks=gen_tasks, method=method, footer=footer),
    "fig3": lambda: report.figure3(evals, params.get("knowledge_eval_tasks") or [],
                                   gen_tasks=gen_tasks, footer=footer),
    "fig4": lambda: report.figure4(evals, model=model,
                                   knowledge_tasks=params.get("knowledge_tasks") or [],
                                   method=method, footer=footer),
}
if name not in builders:
    raise ValueError(f"unknown figure {name!r}; known: {', '.join(builders)}")
figure = builders[name]()
for path in (snakemake.output.png, snakemake.output.pdf):
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format=path.rsplit(".", 1)[1], dpi=150, bbox_inches="tight")
log.info("%s with %d panels", name, len(figure.axes))
