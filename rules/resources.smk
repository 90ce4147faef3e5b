"""Memory and wall time of the evaluation (GPU) rules: sized from the model, growing with retries.

headloc.workflow.resources says how (the estimate, the HEADLOC_EVAL_MEM_MB, HEADLOC_EVAL_RUNTIME,
HEADLOC_MAX_MEM_MB and HEADLOC_MAX_RUNTIME environment variables; docs/slurm.md); Snakemake passes
each resource callable the job's wildcards and its attempt (1, 2, ...).
"""

from headloc.workflow.resources import EvalResources

EVAL_RESOURCES = EvalResources(config)


def eval_mem_mb(wildcards, attempt):
    return EVAL_RESOURCES.mem_mb(getattr(wildcards, "model", None), attempt)


def eval_runtime(wildcards, attempt):
    return EVAL_RESOURCES.runtime(attempt)
