"""Rank the heads of one finished search (checkpoint recover_heads): headloc.methods.steps.recover
(the method's ``recover``: a fit of the masks' scores, greedy's rounds, a one-job search's result,
or a draw), with the search's identity added."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, write_json
from headloc.methods import steps
from headloc.model.geometry import head_geometry

log = log_to_file(snakemake.log[0])
found = steps.recover(steps.RecoverParams(**snakemake.params.recover), steps.RecoverInputs.of(snakemake.input),
                      head_geometry(snakemake.params.location), log)
where = snakemake.wildcards
write_json(snakemake.output[0], {"model": where.model, "task": where.task, "search": where.search, **found})
