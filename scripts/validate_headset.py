"""Evaluate one task on its full data with one head set ablated (rule validate_headset)."""

import numpy as np
import torch

from headloc.evaluation import TaskSpec, load_evaluator
from headloc.heads import head_index, parse_headset
from headloc.io import log_to_file, write_json

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
options = snakemake.params.task
task = TaskSpec(**{**options, "dataset_kwargs": {**options["dataset_kwargs"], "data_file": snakemake.input.docs}})
evaluator = load_evaluator(snakemake.params.location, task, **snakemake.params.model)
heads = parse_headset(snakemake.wildcards.headset)
geometry = evaluator.geometry
mask = np.zeros(geometry.total, dtype=np.int8)
for head in heads:
    mask[head_index(head, geometry.n_layers, geometry.n_heads)] = 1
result = evaluator.evaluate_mask(mask)
log.info("%s with %s ablated: %s = %.4f on %d documents",
         task.lm_eval_task, snakemake.wildcards.headset, task.metric, result.score, len(result.samples))
write_json(snakemake.output[0], {
    "model": snakemake.wildcards.model,
    "task": snakemake.wildcards.task,
    "headset": snakemake.wildcards.headset,
    "heads": heads,
    "metric": task.metric_key,
    "value": result.score,
    "n_docs": len(result.samples),
    "samples": result.samples,
})
