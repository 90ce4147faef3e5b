"""Copy this config's collected table to results/tables/ (rule publish_collected)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from pathlib import Path

from headloc.io import log_to_file, write_text

log = log_to_file(snakemake.log[0])
write_text(snakemake.output[0], Path(snakemake.input[0]).read_text(encoding="utf-8"))
log.info("%s -> %s", snakemake.input[0], snakemake.output[0])
