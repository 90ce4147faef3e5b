"""Keep the most damaging head of one greedy round (rule choose_greedy_head): headloc.methods.kinds.rounds.choose_head."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file
from headloc.methods.kinds import rounds
from headloc.model.geometry import head_geometry

log = log_to_file(snakemake.log[0])
rounds.choose_head(int(snakemake.wildcards.round), head_geometry(snakemake.params.location), snakemake.input.masks,
                   snakemake.input.scores, snakemake.input.previous, snakemake.input.universal, snakemake.output[0],
                   log)
