"""``headloc.locate``: which heads of a loaded model carry a task, in one call::

    import headloc

    found = headloc.locate(model, tokenizer, "headloc_ioi", method="cs_stratified", budget=100)
    found.ranking[:5], found.label, found.n_evals
    found.heatmap(); found.validate(tasks=["headloc_capitals"]); found.to_frame(); found.save("ioi-search")

The search is the workflow's: :func:`headloc.methods.driver.drive` makes the calls its rules make
(the steps of its kind, :mod:`headloc.methods.kinds`: mask design, scoring, refinement, greedy
rounds, gradient job, sequential or guided search, draw, then the recovery that ranks the heads); only the scoring runs here, on your model,
through the engine the workflow's scoring jobs use. The defaults are the workflow's
(config/schema.yaml): budget 100 masks, sparsity 0.05, Lasso penalty by cross-validation, seed 0,
top 5, 16 rows per forward pass, 8 masks per pass.

For a notebook: the model is searched in eval() mode and given back in the mode it came in; a
search shows one progress bar, ``progress=False`` none (lm-eval's own bars and messages are always
off); the result shows itself in a few
lines, or as HTML with its heatmap; what cannot be searched is refused before any work.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from headloc import methods
from headloc.api.checks import (SETTINGS, check_gold, check_least_on, check_model, check_search,
                                check_subset)
from headloc.api.located import Located
from headloc.api.running import LOG, evaluation_mode, gradient_of, quiet, scorer, search_bar
from headloc.api.tasks import Task, count_documents, resolve_task
from headloc.heads import BATCH_SIZE, MASKS_PER_PASS, HeadGeometry
from headloc.methods.driver import drive
from headloc.methods.reads import READS, readers
from headloc.methods.settings import SearchSettings

METHOD = SETTINGS.methods[0]  # the workflow's default method (headloc.methods.settings.DEFAULT_METHOD)


def locate(model, tokenizer, task, *, method: str = METHOD, budget: int | None = None,
           top_k: int = SETTINGS.top_k, seed: int = SETTINGS.seed, sparsity: float = SETTINGS.sparsity,
           alpha=SETTINGS.alpha, options: dict | None = None, documents=None, metric: str | None = None,
           chat: bool = False, include_path=(), dataset_kwargs: dict | None = None,
           batch_size: int | str = BATCH_SIZE, masks_per_pass: int = MASKS_PER_PASS, model_name: str | None = None,
           higher_is_better: bool | None = None, progress: bool = True) -> "Located":
    """Search ``model`` for the heads that carry ``task``; return a :class:`Located`.

    model, tokenizer : a loaded transformers causal LM (any device and dtype headloc can ablate)
        and its tokenizer (None for a callable task). The search runs it in eval() mode and gives
        it back in the mode it came in.
    task : an lm-eval task name (headloc's tasks, ``include_path``, lm-eval's registry), the path
        of a task YAML (its folder is searched for includes and utils), or a callable
        ``task(model) -> float`` that scores the model (called with the heads of a mask ablated).
    method : a registered search method (``headloc.methods.names()``); default ``screened_greedy``,
        the workflow's default (config/schema.yaml), which needs an lm-eval task (it differentiates the gold continuations): name
        one that only scores masks (``group_testing``) for a callable task.
    budget : masks a budgeted method spends, the config's ``search.n_masks`` (compressed sensing, and
        the most a sequential search spends, the unablated row included; default 100); others take
        none. The least: 2 (a Lasso's fit; a sequential search's baseline and one mask), 3 for
        cs_adaptive (its kind's ``least_masks``).
    top_k : heads to report and validate; also greedy's rounds and cs_adaptive's target.
    seed, sparsity, alpha : the mask design's seed, the share of heads a mask ablates, the Lasso
        penalty (``"cv"``: cross-validated); a sparsity or penalty other than the default given to
        a method that does not read it is ignored, and the result's warnings say so.
    options : a gradient, sequential or guided method's hyperparameters (e.g. CHG's ``{"steps": 50}``,
        Thompson sampling's ``{"reward": "damage"}``), over its defaults; a key the method does not
        have, or a value it does not take, is refused.
    documents : which documents the search scores (see :func:`headloc.api.tasks.resolve_task`).
    metric, chat, dataset_kwargs : the lm-eval metric (default: the task's first), chat template,
        arguments of the task's document loader.
    batch_size, masks_per_pass : rows per forward pass (or ``"auto"``; a pass that runs out of GPU
        memory is retried with half the rows), masks sharing one pass (the result does not depend on them).
    higher_is_better : the metric's direction, read from an lm-eval task (give it only where the task
        and lm-eval declare none); a callable's score is higher-is-better unless this is False.
    progress : one progress bar for the search (the masks it scores); False prints nothing but the
        result's warnings (the ``headloc.locate`` logger). lm-eval's own bars and messages are off
        either way.
    """
    spec, settings = check_search(method, budget, options, top_k=top_k, seed=seed, sparsity=sparsity, alpha=alpha)
    check_model(model, tokenizer, task)
    geometry = HeadGeometry.of(model.config)
    check_least_on(spec, settings, geometry)
    resolved = resolve_task(task, metric=metric, chat=chat, documents=documents, include_path=include_path,
                            dataset_kwargs=dataset_kwargs, higher_is_better=higher_is_better)
    check_gold(spec, resolved)
    check_subset(resolved)
    work = tempfile.TemporaryDirectory(prefix="headloc-locate-")  # the files drive writes, kept for save()
    with evaluation_mode(model), quiet(resolved), search_bar(spec, settings, progress) as bar:
        score = scorer(spec, resolved, model, tokenizer, batch_size, masks_per_pass, progress, bar)
        gradient = gradient_of(spec, resolved, model, tokenizer)
        found = drive(spec, score, geometry, work.name, settings, gradient=gradient,
                      higher_is_better=resolved.higher_is_better, log=LOG)
        n_docs = count_documents(resolved)
    search = _search_id(spec, n_docs, settings)
    record = {"model": model_name or _model_name(model), "task": resolved.name, "search": search, **found}
    record["warnings"] = [*record.get("warnings", []), *ignored(spec, settings)]
    located = Located(record=record, parameters=_parameters(spec, settings, n_docs, resolved), task=resolved,
                      model=model, tokenizer=tokenizer, batch_size=batch_size, work=work)
    for warning in located.warnings:  # said last, where a notebook shows it under the bars
        LOG.warning("%s on %s: %s", located.search_id, located.record["task"], warning)
    return located


def ignored(spec, settings: SearchSettings) -> list[str]:
    """A warning for each of ``sparsity`` and ``alpha`` given other than its default to a method that
    does not read it (the workflow's config check notes the same)."""
    return [f"{key}={getattr(settings, key)!r} is ignored: {spec.name} {READS[key].lacks[0]} (the methods that read "
            f"{key}: {', '.join(readers(key))})" for key in ("sparsity", "alpha")
            if getattr(settings, key) != getattr(SETTINGS, key) and not READS[key].reads(spec)]


def _parameters(spec, settings: SearchSettings, n_docs, task: Task) -> dict:
    """What the search was asked, as :attr:`Located.parameters` holds it."""
    chosen = settings.options_of(spec)
    return {"method": spec.name, "budget": settings.n_masks if spec.budgeted else 0, "top_k": settings.top_k,
            "seed": settings.seed, "sparsity": settings.sparsity, "alpha": settings.alpha,
            "options": chosen.as_config() if chosen else {}, "n_docs": n_docs,
            "metric": None if task.callable else task.spec.metric_key}


def _search_id(spec, n_docs, settings: SearchSettings) -> str:
    """The workflow's directory name of the same search (headloc.workflow.plan.Plan.search_id with
    no universal filter and no separate scoring task); a callable task's documents are unknown."""
    tail = f"n{n_docs}_s{settings.seed}" if n_docs is not None else f"s{settings.seed}"
    parts = methods.SearchParts(tail=tail, seed=settings.seed, n_masks=settings.n_masks, sparsity=settings.sparsity,
                                top_k=settings.top_k, options=settings.options_of(spec))
    return spec.search_id(parts)


def _model_name(model) -> str:
    path = getattr(model.config, "name_or_path", "") or getattr(model, "name_or_path", "")
    return Path(str(path)).name or type(model).__name__
