"""Build the measurement matrix of one search (rule make_masks): headloc.methods.kinds.masks.design."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file
from headloc.methods.kinds import masks
from headloc.model.geometry import head_geometry

log = log_to_file(snakemake.log[0])
masks.design(masks.DesignParams(**snakemake.params.design), head_geometry(snakemake.params.location),
             snakemake.output[0], log)
