"""The masks of one greedy round (rule make_greedy_masks): headloc.methods.steps.round_masks."""

from headloc.io import log_to_file
from headloc.methods import steps
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
steps.round_masks(head_geometry(snakemake.params.location), snakemake.input.previous, snakemake.input.universal,
                  snakemake.output[0], log)
