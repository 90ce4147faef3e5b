"""Build the measurement matrix of one search (rule make_masks): headloc.methods.steps.design."""

from headloc.io import log_to_file
from headloc.methods import steps
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
steps.design(steps.DesignParams(**snakemake.params.design), head_geometry(snakemake.params.location),
             snakemake.output[0], log)
