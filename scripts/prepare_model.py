"""Convert a GGUF model into a checkpoint folder (rule prepare_model)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file
from headloc.model.loading import convert_gguf
from headloc.workflow.portable import gguf_location

log = log_to_file(snakemake.log[0])
# params.source is the model's identity (no path); the GGUF is found in this checkout's environment
gguf = gguf_location(snakemake.config, snakemake.wildcards.model)
log.info("converting %s (%s) -> %s", gguf, snakemake.params.source, snakemake.output[0])
convert_gguf(gguf, snakemake.output[0])
log.info("done")
