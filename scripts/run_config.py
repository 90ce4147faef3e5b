"""Write the config a run folder was collected with (rule run_config)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import yaml

from headloc.io import log_to_file, write_text

log = log_to_file(snakemake.log[0])
write_text(snakemake.output[0], yaml.safe_dump(dict(snakemake.params.config), sort_keys=True))
log.info("config of run folder %s", snakemake.output[0])
