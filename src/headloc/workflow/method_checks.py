"""The config's checks of a task's search methods: a method that differentiates needs gold
continuations, options and budgets each method reads; and the notes on keys a method ignores and on
budgets below the planted models' advice."""

from __future__ import annotations

from headloc.data.task_scoring import GOLD_DECLARATION, gold_problem
from headloc import methods as search_methods
from headloc.methods.reads import READS, readers
from headloc.search.budget import suggested_masks
from headloc.workflow.configured import searched_tasks, setting_key, task_settings
from headloc.workflow.task_lookup import TaskYaml
from headloc.workflow.schema import Problem


def check_methods(config: dict, name: str, read: TaskYaml) -> list[Problem]:
    """A searched task runs validation.method, and a gradient method only where a gold continuation exists."""
    if name not in searched_tasks(config):
        return []
    methods, key = task_settings(config, name).methods, setting_key(config, name, "methods")
    validation, problems = config["validation"], []
    if "method" in validation and validation["method"] not in methods:
        problems.append((key, f"{list(methods)} lacks validation.method {validation['method']!r}, whose heads every "
                              f"table uses; expected the methods of task {name} to include it"))
    gradient = [m for m in methods if search_methods.get(m).kind.gold]
    missing = gold_problem(read.yaml) if gradient else None
    if missing:
        problems.append((key, no_gold_message(gradient, read.task, read.path, missing, read.yaml)))
    return problems


def mask_only_methods() -> list[str]:
    """The registered methods that score masks and differentiate nothing (any task will do)."""
    return [name for name in search_methods.names()
            if search_methods.get(name).scored and not search_methods.get(name).kind.gold]


def no_gold_message(gradient: list[str], task: str, path, reason: str, task_config: dict) -> str:
    """Why methods that differentiate a gold continuation cannot run on ``task``, and what can."""
    declare = (f" (or, if its target is a correct answer its scoring accepts, declare {GOLD_DECLARATION} in "
               "its YAML)") if (task_config.get("output_type") or "generate_until") == "generate_until" else ""
    verb = "differentiates" if len(gradient) == 1 else "differentiate"
    return (f"{', '.join(gradient)} {verb} a gold continuation's log-likelihood, and task {task} ({path}) has "
            f"no gold continuation: {reason}; expected methods that only score masks for it: "
            f"{', '.join(mask_only_methods())}{declare}")


def check_method_options(config: dict, name: str) -> list[Problem]:
    """Each option of a searched task's methods is one its search runs with, not one it would cap
    with validation.top_k heads to find (:meth:`headloc.methods.settings.MethodOptions.problems`)."""
    if name not in searched_tasks(config):
        return []
    settings, problems = task_settings(config, name), []
    for method in dict.fromkeys(settings.methods):
        options = settings.options_of(search_methods.get(method))
        problems += [(f"{options.SECTION}.{option}", text.replace("top_k", "validation.top_k"))
                     for option, text in (options.problems(settings.top_k) if options else [])]
    return problems


def spends_masks(config: dict, name: str) -> bool:
    """Whether a task's searches score a mask design (a searched task with a budgeted method)."""
    return name in searched_tasks(config) and any(search_methods.get(m).budgeted for m in task_settings(config, name).methods)


def designs_masks(config: dict, name: str) -> bool:
    """Whether a task's searches include a budgeted mask design (a kind whose masks are designed up
    front), whose ``n_masks`` is its size; a sequential search's is a cap it stops below by itself."""
    return name in searched_tasks(config) and any(search_methods.get(m).kind.fixed_design and search_methods.get(m).budgeted
                                                  for m in task_settings(config, name).methods)


def check_budgets(config: dict, name: str) -> list[Problem]:
    """A task's mask design is larger than every budget cut from it and than its scoring jobs."""
    if not spends_masks(config, name):
        return []
    settings, problems = task_settings(config, name), []
    n_masks = settings.n_masks
    too_big = [b for b in settings.budgets if b >= n_masks]
    if too_big:
        problems.append(("search.budgets", f"{too_big} not below the {n_masks} masks of task {name}; expected "
                                           "budgets smaller than n_masks (each is cut from the first rows of "
                                           "that design)"))
    if settings.chunks > n_masks:
        problems.append(("search.chunks", f"{settings.chunks} is larger than the {n_masks} masks of task {name}; "
                                          f"expected at most {n_masks} scoring jobs per search"))
    return problems


def ignored_notes(given: dict, config: dict) -> list[str]:
    """A note for each search key the user set (``given``: the config as written, before the
    schema's defaults) that a searched task's methods ignore (:data:`headloc.methods.reads.READS`): a method that
    spends no mask budget (guided greedy, the gradient methods, random) reads neither ``n_masks``
    nor ``budgets``; only the methods of drawn masks read ``sparsity``, only the Lasso ``alpha``,
    only a kind that scores masks in chunk jobs ``chunks``, only a random method ``repeats``. A
    note, not a refusal: the same config may name methods that do read them."""
    found: dict[tuple, list[str]] = {}
    for name in searched_tasks(config):
        methods = task_settings(config, name).methods
        own = ((given.get("tasks") or {}).get(name) or {}).get("search") or {}
        for key, reads in READS.items():
            ignoring = tuple(m for m in methods if not reads.reads(search_methods.get(m)))
            where = f"tasks.{name}.search.{key}" if key in own else f"search.{key}"
            value = own[key] if key in own else (given.get("search") or {}).get(key)
            if not ignoring or value is None or value == []:
                continue
            reading = tuple(m for m in methods if m not in ignoring)
            found.setdefault((key, where, repr(value), ignoring, reading), []).append(name)
    return [ignored_note(*fields, names) for fields, names in found.items()]


def ignored_note(key, where, value, ignoring, reading, names) -> str:
    """One note of :func:`ignored_notes`: the key as set, the methods that ignore it on ``names``,
    every method that reads it, and those of the same tasks that do (``reading``)."""
    it = READS[key]
    one = len(ignoring) == 1
    everyone = ", ".join(readers(key))
    used = f"; {', '.join(reading)} {it.verb[len(reading) > 1]} it" if reading else ""
    return (f"note: config {where}: {value} is ignored for {', '.join(ignoring)} on "
            f"{'task' if len(names) == 1 else 'tasks'} {', '.join(names)}: {'it' if one else 'they'} "
            f"{it.lacks[not one]} ({it.readers}: {everyone}){used}")


def budget_notes(config: dict, geometries: dict, tasks: list[str]) -> list[str]:
    """A note for each mask-design budget of ``tasks`` below what the planted-head models advise for
    a model (:func:`headloc.search.budget.suggested_masks`); none for a model of unknown geometry,
    nor for a search without a mask design (:func:`designs_masks`)."""
    budgets = {}  # n_masks -> the searched tasks whose mask designs spend it
    for name in tasks:
        if designs_masks(config, name):
            budgets.setdefault(task_settings(config, name).n_masks, []).append(name)
    top_k, notes = config["validation"]["top_k"], []
    for model, geometry in geometries.items():
        if geometry is None:
            continue
        advised = suggested_masks(geometry.total, top_k)
        notes += [f"note: config search.n_masks: {n_masks} masks for {', '.join(searched)} on model {model} "
                  f"({geometry.total} heads): on the planted-head models about {advised} masks put 95 % of "
                  f"{top_k} heads (validation.top_k) among {geometry.total} in the top {top_k}; fewer can miss "
                  "some (docs/ground-truth.md, 'Budget advice')"
                  for n_masks, searched in sorted(budgets.items()) if n_masks < advised]
    return notes
