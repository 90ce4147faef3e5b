"""Resources of the evaluation (GPU) rules that grow with each retry of a failed job.

Snakemake passes `attempt` (1, 2, ...) to resource callables; with `--retries N` (the SLURM
profile sets 2) a job killed for running out of memory or time is resubmitted with more of both.
The base values suit the paper's largest model (8B, bf16) on one GPU; override them per rule with
`--set-resources score_masks:mem_mb=64000` (a fixed value) or, in a profile,
`set-resources: {score_masks: {mem_mb: "64000 * attempt"}}` (see docs/slurm.md).
"""

# host memory of the first attempt: the model is loaded on the CPU first
EVAL_MEM_MB = 32000
EVAL_RUNTIME = 120  # minutes of the first attempt


def eval_mem_mb(wildcards, attempt):
    """Host memory in MB: the base on the first attempt, twice it on the second, and so on."""
    return EVAL_MEM_MB * attempt


def eval_runtime(wildcards, attempt):
    """Wall time in minutes: the base on the first attempt, twice it on the second, and so on."""
    return EVAL_RUNTIME * attempt
