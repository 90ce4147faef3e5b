"""The evaluating jobs' template: every rule that loads a model to evaluate it (score_masks,
search_job, score_top_heads, validate_headset and the rules derived from
them) takes its resources from EVALUATING and its params from evaluating_params, so that none can
miss the GPU, the model-sized memory and time or the GPU partition.

Memory and wall time are sized from the model and grow with retries: headloc.workflow.resources
says how (the estimate, the HEADLOC_EVAL_MEM_MB, HEADLOC_EVAL_RUNTIME, HEADLOC_MAX_MEM_MB and
HEADLOC_MAX_RUNTIME environment variables; docs/slurm.md); Snakemake passes each resource callable
the job's wildcards and its attempt (1, 2, ...). On Slurm the jobs go to HEADLOC_GPU_PARTITION,
else to SBATCH_PARTITION (empty: the cluster's default); set here rather than in the profile, so
that a new evaluating rule, or a --set-resources on the command line, cannot lose it.
"""

from headloc.workflow.resources import EvalResources

EVAL_RESOURCES = EvalResources(config)
GPU_PARTITION = os.environ.get("HEADLOC_GPU_PARTITION") or os.environ.get(
    "SBATCH_PARTITION", ""
)


def eval_mem_mb(wildcards, attempt):
    return EVAL_RESOURCES.mem_mb(getattr(wildcards, "model", None), attempt)


def eval_runtime(wildcards, attempt):
    return EVAL_RESOURCES.runtime(attempt)


EVALUATING = dict(
    gpu=1, mem_mb=eval_mem_mb, runtime=eval_runtime, slurm_partition=GPU_PARTITION
)


def local_cores(wildcards):
    """Every core of a local run (--cores; Snakemake gives a job no more than that), for a job
    that runs by itself: single_head_damage, one per model, waits for every search of the model
    and every validation waits for it. torch then uses them all (docs/performance.md). 1 on a
    cluster, where --cores is not one machine's and a GPU job's CPUs are cpus_per_gpu
    (profiles/slurm); the Slurm job step's executor is not local either."""
    return workflow.cores if workflow.local_exec else 1


def evaluating_params(task=None):
    """An evaluating job's params: the model's location and settings and, given ``task`` (a param
    function: how the job's task is scored), the task and the digest of its files (their content,
    not their paths), on which its results depend."""
    if task is None:
        return dict(location=model_location, model=model_options)
    return dict(
        task_digest=task_digest, location=model_location, model=model_options, task=task
    )
