"""Render one paper table as Markdown, CSV and LaTeX (rule render_table).

Reads only the named inputs the rule gives this table (evals, recoveries, models, tuning).
"""

import pandas as pd

from headloc import report
from headloc.io import log_to_file, write_text

log = log_to_file(snakemake.log[0])
frames = {name: pd.read_csv(path, sep="\t") for name, path in snakemake.input.items()}
params = snakemake.params
k = params.get("top_k", 5)
gen_tasks = params.get("gen_tasks")
method = params.get("method")
capabilities = params.get("capabilities") or {}
knowledge_eval_tasks = params.get("knowledge_eval_tasks") or []
gen = "the other tasks" if gen_tasks is None else ", ".join(gen_tasks)
main = f"method {method}" if method else "every method"


def needs(name):
    """The input frame ``name``; a clear error when the rule did not give it."""
    if name not in frames:
        raise ValueError(f"table {snakemake.wildcards.table} needs input {name!r}; "
                         f"the rule gave: {', '.join(frames) or 'nothing'}")
    return frames[name]


builders = {
    "table1": (lambda: report.table1(needs("models")),
               "Table 1. Layers L, heads per layer H and total heads N of each model"),
    "table2": (lambda: report.table2(needs("evals"), k=k, gen_tasks=gen_tasks, method=method),
               f"Table 2. Change in task score (Delta Task) and in the mean of {gen} (Delta Gen), "
               f"percentage points, top {k} heads ({main}) ablated"),
    "table3": (lambda: report.table3(needs("evals"), k=k, gen_tasks=gen_tasks, method=method),
               f"Table 3. Heads identified on one task (id on), top {k} ({main}) ablated, "
               "evaluated on every task of the same capability (eval on); percentage points"),
    "table4": (lambda: report.table4(needs("evals"), needs("recoveries"), k=k, gen_tasks=gen_tasks),
               f"Table 4. Every search method: Delta Task, Delta Gen (top {k} heads ablated, "
               "percentage points) and the number of evaluations it needed"),
    "table5": (lambda: report.table5(needs("evals"), gen_tasks=gen_tasks,
                                     capabilities=capabilities),
               "Table 5. Universal heads: mean change per capability when one head is ablated "
               "(percentage points)"),
    "table6": (lambda: report.table6(needs("evals"), gen_tasks=gen_tasks, method=method),
               f"Table 6. Score and degradation against the number of top heads ({main}) ablated "
               "(BL = unablated)"),
    "table7": (lambda: report.table7(needs("evals")),
               "Table 7. Universal heads: unablated scores (BL) and the change on every task when "
               "one head is ablated (percentage points)"),
    "table8": (lambda: report.table8(needs("evals"), knowledge_eval_tasks),
               "Table 8. Knowledge multiple-choice heads: unablated scores (BL) and the change "
               "when one head is ablated, knowledge MC tasks grouped apart (percentage points)"),
    "table9": (lambda: report.table9(needs("recoveries"), k=k),
               f"Table 9. Top {k} heads identified by every method, per model and task"),
    "table10": (lambda: report.table10(needs("recoveries"), k=k, method=method),
                f"Table 10. Top {k} heads per model and task ({main}, most damaging first)"),
    "tuning": (lambda: report.tuning_table(needs("tuning")),
               "Hyperparameter search (appendix A.1): degradation on the identification subset "
               "per number of masks and sparsity; chosen = largest degradation"),
}
name = snakemake.wildcards.table
if name not in builders:
    raise ValueError(f"unknown table {name!r}; known: {', '.join(builders)}")
build, title = builders[name]
table = build()
sources = ", ".join(str(path) for path in snakemake.input)
footer = f"made by rule render_table ({name}) with scripts/render_table.py from {sources}"
write_text(snakemake.output.md, report.to_markdown(table, title=title, footer=footer))
write_text(snakemake.output.csv, report.to_csv(table))
latex = report.to_latex(table, caption=title, footer=footer, label=f"tab:{name}")
write_text(snakemake.output.tex, latex)
log.info("%s: %d rows %s", name, len(table), table.attrs.get("note", ""))
