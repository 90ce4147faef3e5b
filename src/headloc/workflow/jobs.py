"""How every evaluating job of the workflow starts (the scripts of the rules that take the
evaluating jobs' template, rules/resources.smk: score_masks, search_job, score_top_heads,
validate_headset), and what a one-job search's job is made of (:func:`one_job`)."""

from __future__ import annotations

import logging

import torch

from headloc.io import log_to_file
from headloc.model.gpus import claim_gpu
from headloc.workflow.task_lookup import task_folders
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
    search_job, score_top_heads): the model at ``location`` with its settings ``model``, the
    task as the job's params give it (``task``, its files found in this checkout) on ``docs``."""
    from headloc.engine.evaluation import load_evaluator
    from headloc.engine.lm_eval_tasks import TaskSpec

    spec = TaskSpec(**located(task, config)).with_documents(docs)
    return load_evaluator(location, spec, include_path=task_folders(config), log=log, **model)


def one_job(kind, params, folder: str, docs, inputs, config: dict, log):
    """The :class:`headloc.methods.driver.Job` of a one-job search (rule search_job) of ``kind``:
    the model loaded once, as an evaluator of the scoring task where the kind scores masks, the
    gold continuations of the same documents ``docs`` where it differentiates them; its files in
    ``folder``. ``params``: the rule's (location, model, task_digest, tasks: the task options by
    role, scoring and gold, that the kind reads; step: the step's parameters); ``inputs``: the job's
    input files, on whose modification times its record depends."""
    from headloc.engine.evaluation import scored
    from headloc.engine.lm_eval_tasks import TaskSpec
    from headloc.engine.supervision import task_examples
    from headloc.heads import HeadGeometry
    from headloc.methods.driver import Job
    from headloc.methods.kinds import SearchFiles
    from headloc.methods.record import record_key
    from headloc.model.loading import load_model
    from headloc.model.memory import CPU_ROWS

    tasks, model_options, method = params.tasks, params.model, params.step["method"]
    score = None
    if kind.scored:
        evaluator = scoring_evaluator(params.location, model_options, tasks["scoring"], docs, config, log)
        model, tokenizer, geometry = evaluator.model, evaluator.tokenizer, evaluator.geometry

        def score(masks):  # scores and per-document scores (each head's evidence: headloc.search.evidence)
            return scored(evaluator.evaluate_masks(masks, desc=method))
    else:
        model, tokenizer = load_model(params.location, dtype=model_options["dtype"], device=model_options["device"],
                                      device_map=model_options.get("device_map"))
        geometry = HeadGeometry.of(model.config)
    gradient = None
    if kind.gold:
        gold = TaskSpec(**located(tasks["gold"], config)).with_documents(docs)
        examples = task_examples(tokenizer, gold, include_path=[str(folder) for folder in task_folders(config)])
        log.info("%s on %s: %d documents, %d tokens per masked evaluation", method, gold.lm_eval_task,
                 len(examples), sum(e.n_tokens for e in examples))
        gradient = (model, examples)
    # rows per gradient pass: memory only, the result does not depend on it. No out-of-memory
    # back-off for gradients yet, so `auto` takes the CPU's safe default, on any device.
    batch_size = CPU_ROWS if model_options["batch_size"] == "auto" else model_options["batch_size"]
    # a record left by a run on other model files, documents or task files is not resumed
    key = record_key(task_digest=params.task_digest, location=params.location, model=model_options, task=tasks,
                     inputs=inputs)
    return Job(score, geometry, SearchFiles(folder), params.step.get("higher_is_better", True), log, gradient,
               batch_size=batch_size, key=key)
