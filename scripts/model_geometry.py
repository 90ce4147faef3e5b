"""Write a model's head geometry (rule model_geometry, paper Table 1)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, write_json
from headloc.model.geometry import geometry_record

log = log_to_file(snakemake.log[0])
geometry = geometry_record(snakemake.params.location)
record = {"model": snakemake.wildcards.model, "source": snakemake.params.source, **geometry}
log.info("%s", record)
write_json(snakemake.output[0], record)
