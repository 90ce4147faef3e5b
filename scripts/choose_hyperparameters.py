"""Choose the grid point whose top heads degrade the task most (rule choose_hyperparameters)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, read_json, write_json
from headloc.workflow.plan import choose_tuning_point

log = log_to_file(snakemake.log[0])
points = [read_json(path) for path in snakemake.input]
best = choose_tuning_point(points)
log.info("chosen: %s (degradation %.1f)", best["search"], best["degradation"])
write_json(snakemake.output[0], {
    "model": best["model"], "task": best["task"], "chosen": best["search"],
    "points": [{**p, "chosen": p["search"] == best["search"]} for p in points],
})
