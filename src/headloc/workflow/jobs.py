"""How every evaluating job of the workflow starts (the scripts of the rules that take the
evaluating jobs' template, rules/resources.smk: score_masks, sequential_search, score_top_heads,
validate_headset, gradient_search)."""

from __future__ import annotations

import logging

import torch

from headloc.io import log_to_file
from headloc.model.gpus import claim_gpu
from headloc.workflow.config import task_folders
from headloc.workflow.portable import located


def start_evaluating_job(log_path, threads: int, *, spread: bool) -> logging.Logger:
    """Send the job's logging to ``log_path``, claim its GPU and use ``threads`` CPU threads.

    The GPU is claimed before anything touches CUDA and held until the job's process ends
    (:mod:`headloc.model.gpus`); ``spread`` (a model placed by ``device_map``) claims none, the
    model uses every visible GPU. Returns the job's logger.
    """
    log = log_to_file(log_path)
    claim_gpu(log, spread=spread)
    torch.set_num_threads(threads)
    return log


def scoring_evaluator(location: str, model: dict, task: dict, docs, config: dict, log):
    """The evaluator of a job that scores masks on a task's documents (score_masks,
    sequential_search, score_top_heads): the model at ``location`` with its settings ``model``, the
    task as the job's params give it (``task``, its files found in this checkout) on ``docs``."""
    from headloc.engine.evaluation import TaskSpec, load_evaluator

    spec = TaskSpec(**located(task, config)).with_documents(docs)
    return load_evaluator(location, spec, include_path=task_folders(config), log=log, **model)
