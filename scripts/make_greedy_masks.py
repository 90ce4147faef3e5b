"""The masks of one greedy round (rule make_greedy_masks): headloc.methods.kinds.rounds.round_masks."""

from headloc.io import log_to_file
from headloc.methods.kinds import rounds
from headloc.model.geometry import head_geometry

log = log_to_file(snakemake.log[0])
rounds.round_masks(head_geometry(snakemake.params.location), snakemake.input.previous, snakemake.input.universal,
                   snakemake.output[0], log)
