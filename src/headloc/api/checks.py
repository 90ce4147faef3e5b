"""What :func:`headloc.locate` refuses before any work, each refusal naming the bad value and what
would be valid: the search's arguments, the model and tokenizer, a method that needs gold
continuations on a task without them, too few documents, a budget below what the model needs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from headloc import methods
from headloc.api.tasks import Task, count_documents
from headloc.heads import HeadGeometry
from headloc.methods.settings import SearchSettings

SETTINGS = SearchSettings()  # the workflow's search defaults: every default of a search here is one of these


def check_search(method: str, budget, options, *, top_k, seed, sparsity, alpha) -> tuple:
    """The search's arguments checked before any work: (the method, its :class:`SearchSettings`);
    ValueError naming a bad one and what would be valid."""
    spec = methods.get(method)
    n_masks = n_masks_of(spec, budget)
    given = {} if options is None else options
    if not isinstance(given, Mapping):
        raise ValueError(f"options must be a dict of {spec.name}'s hyperparameters, got {options!r}")
    if given and spec.options is None:
        with_options = [name for name in methods.names() if methods.get(name).options]
        raise ValueError(f"method {spec.name!r} takes no options, got {dict(given)!r}; the methods with "
                         f"options are {', '.join(with_options)}")
    settings = SearchSettings(n_masks=n_masks, top_k=top_k, seed=seed, sparsity=sparsity, alpha=alpha,
                              options={spec.name: given} if spec.options else {})
    chosen = settings.options_of(spec)
    for option, text in chosen.problems(settings.top_k) if chosen else []:
        raise ValueError(f"options[{option!r}] of {spec.name}: {text}")
    return spec, settings


def n_masks_of(spec, budget) -> int:
    """The method's ``n_masks``: ``budget``, or the default, for a budgeted method (refused below
    its least); the default, unused, for the others (which refuse a budget)."""
    if not spec.budgeted:
        if budget is not None:
            raise ValueError(f"method {spec.name!r} spends no mask budget (budget={budget!r}); the budgeted "
                             f"methods are {', '.join(methods.names(budgeted=True))}")
        return SETTINGS.n_masks
    budget = SETTINGS.n_masks if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise ValueError(f"budget must be a whole number of masks for {spec.name}, got {budget!r}")
    least, why = spec.kind.least_masks(spec)
    if budget < least:
        raise ValueError(f"budget {budget} is too small for {spec.name}: it needs at least {least} masks ({why})")
    return int(budget)


def check_least_on(spec, settings: SearchSettings, geometry: HeadGeometry) -> None:
    """A method whose least budget depends on the model (group testing: the baseline and one whole
    partition) refuses a smaller one before any work, as the workflow's config check does."""
    if not spec.budgeted or spec.least_budget is None:
        return
    least, setting, need = spec.least_budget(geometry.total, settings.top_k, settings.options_of(spec))
    if settings.n_masks < least:
        raise ValueError(f"budget {settings.n_masks} is too small for {spec.name} on this model ({geometry.total} "
                         f"heads, {setting}): it needs at least {least} masks ({need}); give budget >= {least}")


def check_model(model, tokenizer, task) -> None:
    """Refuse, before any work, what cannot be searched: a tokenizer (or anything but a transformers
    model) where the model goes, a model where the tokenizer goes, and, where an lm-eval task reads the
    next-token logits, a model without a language-model head or a missing tokenizer."""
    import torch
    from transformers import PreTrainedTokenizerBase

    if isinstance(model, PreTrainedTokenizerBase):
        raise TypeError(f"model is a tokenizer ({type(model).__name__}); pass the model first, then its "
                        "tokenizer: locate(model, tokenizer, task)")
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise TypeError(f"model must be a loaded transformers model (a torch module with a config), "
                        f"got {type(model).__name__}")
    if isinstance(tokenizer, torch.nn.Module):
        raise TypeError(f"tokenizer is a model ({type(tokenizer).__name__}); pass the model first, then its "
                        "tokenizer: locate(model, tokenizer, task)")
    if callable(task):  # it scores the model its own way
        return
    if tokenizer is None:
        raise ValueError(f"lm-eval task {str(task)!r} needs the model's tokenizer; got tokenizer=None")
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise TypeError(f"tokenizer must be a transformers tokenizer (AutoTokenizer.from_pretrained), "
                        f"got {type(tokenizer).__name__}")
    lm_head = getattr(model, "get_output_embeddings", lambda: None)()
    if lm_head is None:
        raise TypeError(f"model {type(model).__name__} has no language-model head (get_output_embeddings() is "
                        "None), but an lm-eval task scores next-token logits: load it with "
                        "AutoModelForCausalLM (e.g. GPT2LMHeadModel, not GPT2Model)")


def check_gold(spec, task: Task) -> None:
    """A method that differentiates the gold continuations needs an lm-eval task that has them: its
    own target, read from its YAML (:func:`headloc.data.task_scoring.gold_problem`); a callable has none."""
    if not spec.kind.gold:
        return
    from headloc.workflow.method_checks import mask_only_methods, no_gold_message

    if task.callable:
        raise ValueError(f"method {spec.name!r} differentiates the gold continuations of an lm-eval task; "
                         f"a callable task has none. Use an lm-eval task, or one of {', '.join(mask_only_methods())}")
    from headloc.data.documents import lm_eval_tasks_dir, load_task_yaml, task_yaml
    from headloc.data.task_scoring import gold_problem

    path = task_yaml(task.name, [*task.task_folders, lm_eval_tasks_dir()])
    config = load_task_yaml(path)
    reason = gold_problem(config)
    if reason:
        raise ValueError(f"method {no_gold_message([spec.name], task.name, path, reason, config)}")


def check_subset(task: Task) -> None:
    """The documents asked for (``documents=``: a number, indices or a file) are at least two, as the
    workflow's identification subset (``search.id_docs``): one document has no spread to measure
    noise by, and what ablating a head does to it cannot be told from its quirks."""
    from headloc.workflow.task_checks import MIN_ID_DOCS

    spec = None if task.callable else task.spec
    if spec is None or (spec.doc_ids is None and not spec.dataset_kwargs.get("data_file")):
        return  # the task's own documents: counted by lm-eval, after the search
    n_docs = count_documents(task)
    if n_docs < MIN_ID_DOCS:
        raise ValueError(f"documents: {n_docs} document{'s' if n_docs != 1 else ''} to search task {task.name!r} on; "
                         f"expected at least {MIN_ID_DOCS} (a number, indices or a file of them): what ablating a "
                         "head does to one document cannot be told from that document's quirks")
