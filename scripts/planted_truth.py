"""Measure a planted model's truth and write truth.json beside it (rule planted_truth)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.groundtruth.truth import measure
from headloc.groundtruth.truth_table import summary_table
from headloc.io import log_to_file, write_json, write_text

log = log_to_file(snakemake.log[0])
truth = measure(snakemake.input.model, log=log.info)
write_json(snakemake.output.truth, truth)
write_text(snakemake.output.table, summary_table(truth) + "\n")
log.info("truth of %s measured in %s s", truth["model"], truth["seconds"])
