"""Run a sequential search method (group_testing, thompson) on the identification subset (rule
sequential_search): one model load, then headloc.methods.kinds.sequential.sequential, which scores round after
round through the evaluator (a round's masks share forward passes, masks_per_pass at a time) and
resumes from the search's record when a killed run of the same job left one."""

from headloc.engine.evaluation import scored
from headloc.methods.kinds import sequential
from headloc.workflow import paths
from headloc.workflow.jobs import scoring_evaluator, start_evaluating_job

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
p = snakemake.params
evaluator = scoring_evaluator(p.location, p.model, p.task, snakemake.input.docs, snakemake.config, log)


def score(masks):  # scores and per-document scores (each head's evidence: headloc.search.evidence)
    return scored(evaluator.evaluate_masks(masks, desc=p.sequential["method"]))


# a record left by a run on other model files, documents or task files is not resumed
key = sequential.record_key(task_digest=p.task_digest, location=p.location, model=p.model, task=p.task,
                            inputs=list(snakemake.input))
sequential.sequential(sequential.SequentialParams(**p.sequential), evaluator.geometry, score,
                      paths.RECORD.format(**snakemake.wildcards), snakemake.output[0], log, key=key)
