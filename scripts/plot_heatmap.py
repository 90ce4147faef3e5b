"""Draw one search's per-head effect as a layers x heads heatmap (rule plot_heatmap).

Reads the search's ``recovery.json`` (checkpoint recover_heads) and hands it to
``headloc.report.heatmap.save_heatmap``: its ``coef`` (CHG: its G- and G+ gates), top heads outlined.
"""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import atomic_path, log_to_file, read_json
from headloc.report.heatmap import panels, save_heatmap

log = log_to_file(snakemake.log[0])
record = read_json(snakemake.input[0])
footer = f"made by rule plot_heatmap with scripts/plot_heatmap.py from {snakemake.input[0]}"
with atomic_path(snakemake.output[0]) as tmp:
    save_heatmap(record, tmp, footer=footer, format="png")
log.info("%s: %s, top heads %s", snakemake.input[0], ", ".join(p.field for p in panels(record)),
         ", ".join(record.get("top_heads", [])))
