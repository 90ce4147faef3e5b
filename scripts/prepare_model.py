"""Convert a GGUF model into a checkpoint folder (rule prepare_model)."""

from headloc.io import log_to_file
from headloc.models import convert_gguf

log = log_to_file(snakemake.log[0])
log.info("converting %s -> %s", snakemake.params.gguf, snakemake.output[0])
convert_gguf(snakemake.params.gguf, snakemake.output[0])
log.info("done")
