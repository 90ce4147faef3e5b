"""How every evaluating job of the workflow starts (the scripts of the rules holding ``gpu=1``:
score_masks, sequential_search, score_top_heads, validate_headset, gradient_search)."""

from __future__ import annotations

import logging

import torch

from headloc.io import log_to_file
from headloc.model.gpus import claim_gpu


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
