"""The config's rules across keys, each a small named check returning its problems as (key, text)
pairs (:data:`headloc.workflow.schema.Problem`): names that must refer to configured tasks or models,
report and export choices, and each model's head names, top k and sequential budgets against its
heads. :func:`headloc.workflow.config.check_config` runs them."""

from __future__ import annotations

from pathlib import Path

from headloc.data.units import is_fraction
from headloc import methods as search_methods
from headloc.heads import BATCH_SIZE, MASKS_PER_PASS, HeadGeometry, parse_head
from headloc.model.memory import resolve_rows
from headloc.workflow.configured import searched_tasks, setting_key, task_settings
from headloc.workflow.schema import Problem


def _names(key: str, value, pool: list[str], what: str) -> list[Problem]:
    return [(f"{key}[{i}]", f"{name!r} is not {what}; valid: {', '.join(pool) or '(none)'}")
            for i, name in enumerate(value or []) if name not in pool]


def check_searched_tasks(config: dict) -> list[Problem]:
    """At least one task is searched."""
    if searched_tasks(config):
        return []
    return [("tasks", f"no task has localize: true ({', '.join(config['tasks'])} are all evaluation-only); "
                      "expected at least one task to search heads on")]


def check_gen_tasks(config: dict) -> list[Problem]:
    """validation.gen_tasks names configured tasks, each scored in percent (Delta Gen averages them)."""
    tasks, gen_tasks = config["tasks"], config["validation"].get("gen_tasks")
    problems = _names("validation.gen_tasks", gen_tasks, list(tasks), "a configured task")
    for i, name in enumerate(gen_tasks or []):
        spec = tasks.get(name, {})
        if spec and not spec.get("relative") and not is_fraction(spec.get("metric") or "acc"):
            problems.append((f"validation.gen_tasks[{i}]", f"{name!r} is scored by {spec['metric']!r}, shown in "
                             "its own unit, but Delta Gen averages changes in percent; expected tasks whose "
                             "metric is a fraction (FRACTION_METRICS in headloc.data.units) or relative tasks"))
    return problems


def check_task_lists(config: dict) -> list[Problem]:
    """knowledge.tasks and tuning.tasks name searched tasks, knowledge.eval_tasks configured ones, and
    knowledge.min_tasks is at most the number of knowledge tasks."""
    names, searched = list(config["tasks"]), searched_tasks(config)
    knowledge, tuning = config.get("knowledge", {}), config.get("tuning", {})
    problems = [*_names("knowledge.tasks", knowledge.get("tasks"), searched, "a searched task (localize: true)"),
                *_names("knowledge.eval_tasks", knowledge.get("eval_tasks"), names, "a configured task"),
                *_names("tuning.tasks", tuning.get("tasks"), searched, "a searched task (localize: true)")]
    min_tasks, count = knowledge.get("min_tasks"), len(knowledge.get("tasks") or [])
    if min_tasks is not None and min_tasks > count:
        problems.append(("knowledge.min_tasks", f"{min_tasks} is larger than the {count} knowledge.tasks; "
                                                f"expected 1..{count} or null"))
    return problems


def check_masks_per_pass(config: dict) -> list[Problem]:
    """Each model's masks_per_pass fits in the rows of one forward pass (its batch_size)."""
    problems = []
    for name, spec in config["models"].items():
        per_pass = spec.get("masks_per_pass", MASKS_PER_PASS)
        rows = resolve_rows(spec.get("batch_size", BATCH_SIZE), spec.get("device", "cpu"))
        if per_pass > rows:
            problems.append((f"models.{name}.masks_per_pass", f"{per_pass} is larger than batch_size {rows}, "
                                                              f"the rows of one forward pass; expected 1..{rows}"))
    return problems


def check_report_choices(config: dict) -> list[Problem]:
    """report.model is a configured model and report.capability that of a searched task."""
    report, models, tasks = config.get("report", {}), config["models"], config["tasks"]
    problems = []
    if report.get("model") is not None and report["model"] not in models:
        problems.append(("report.model", f"{report['model']!r} is not a configured model; valid: "
                                         f"{', '.join(models)} or null"))
    capabilities = list(dict.fromkeys(tasks[t].get("capability") or t for t in searched_tasks(config)))
    if report.get("capability") is not None and report["capability"] not in capabilities:
        problems.append(("report.capability", f"{report['capability']!r} is not the capability of a searched "
                                              f"task; valid: {', '.join(capabilities) or '(none)'} or null"))
    return problems


def check_include_path(config: dict) -> list[Problem]:
    """Every folder of include_path exists."""
    return [(f"include_path[{i}]", f"{folder!r} is not a directory; expected a folder of lm-eval task YAMLs")
            for i, folder in enumerate(config.get("include_path") or []) if not Path(folder).expanduser().is_dir()]


def check_mirror(config: dict) -> list[Problem]:
    """data.mirror, when set, is a folder."""
    mirror = config.get("data", {}).get("mirror")
    if mirror and not Path(mirror).expanduser().is_dir():
        return [("data.mirror", f"{mirror!r} is not a directory; expected a local data mirror or null (the hub)")]
    return []


def check_universal_models(config: dict) -> list[Problem]:
    """universal.heads lists heads of configured models only."""
    models = config["models"]
    return [(f"universal.heads.{model}", f"{model!r} is not a configured model; valid: {', '.join(models)}")
            for model in config.get("universal", {}).get("heads", {}) if model not in models]


def check_export(config: dict) -> list[Problem]:
    """export.mib: its method is run on every searched task, and its names map searched tasks and
    configured models to MIB's names, one folder name each (:func:`headloc.report.export.mib_folder`)."""
    from headloc.report.export import MIB_MODELS, MIB_TASKS

    mib, searched = config.get("export", {}).get("mib", {}), searched_tasks(config)
    return [*check_export_method(config, mib.get("method"), searched),
            *check_mib_names("tasks", searched, mib.get("tasks") or {}, MIB_TASKS),
            *check_mib_names("models", list(config["models"]), mib.get("models") or {}, MIB_MODELS)]


def check_export_method(config: dict, method: str | None, searched: list[str]) -> list[Problem]:
    """export.mib.method, when set, is a registered method run on every searched task."""
    if method is None:
        return []
    if method not in search_methods.names():
        return [("export.mib.method", f"{method!r} is not a search method; valid: {', '.join(search_methods.names())}")]
    missing = [task for task in searched if method not in task_settings(config, task).methods]
    return [("export.mib.method", f"{method!r} is not run on task {task!r}; expected a method run on every "
                                  "searched task (search.methods, tasks.<name>.search.methods)") for task in missing]


def check_mib_names(key: str, ids: list[str], names: dict, valid: tuple[str, ...]) -> list[Problem]:
    """export.mib.<key> maps ``ids`` (headloc's) to ``valid`` names (MIB's), and no two ids end up
    with the same name (an unmapped id keeps its own, :func:`headloc.report.export.mib_name`)."""
    from headloc.report.export import mib_name

    what = {"tasks": "a searched task", "models": "a configured model"}[key]
    problems = [(f"export.mib.{key}.{i}", f"{i!r} is not {what}; valid: {', '.join(ids)}")
                for i in names if i not in ids]
    problems += [(f"export.mib.{key}.{i}", f"{name!r} is not one of MIB's {key}; valid: {', '.join(valid)}")
                 for i, name in names.items() if name not in valid]
    spelled: dict[str, list[str]] = {}
    for i in ids:
        spelled.setdefault(mib_name(i, {i: names[i]} if names.get(i) in valid else {}, valid, key), []).append(i)
    return problems + [(f"export.mib.{key}", f"{' and '.join(map(repr, same))} would all be named {name!r} in the "
                                             f"MIB submission; expected one name per {key[:-1]}")
                       for name, same in spelled.items() if len(same) > 1]


def check_heads(config: dict, model: str, geometry: HeadGeometry) -> list[Problem]:
    """Every head named for a model is inside it, and no top-k or top-n exceeds its heads."""
    validation, universal = config["validation"], config.get("universal", {})
    total = geometry.total
    inside = f"model {model} has layers 0..{geometry.n_layers - 1} and heads 0..{geometry.n_heads - 1}"
    named = [(key, head) for key, head in named_heads(config, model) if _spelling(head) is None]
    problems = [(key, f"head {head} is outside the model: {inside}") for key, head in named
                if _outside(parse_head(head), geometry)]
    for key, value in (("validation.top_k", validation["top_k"]), ("universal.top_n", universal.get("top_n")),
                       ("knowledge.top_n", config.get("knowledge", {}).get("top_n"))):
        if value is not None and value > total:
            problems.append((key, f"{value} is larger than the {total} heads of model {model} "
                                  f"({geometry.n_layers} layers x {geometry.n_heads}); expected 1..{total}"))
    return problems


def named_heads(config: dict, model: str | None = None) -> list[tuple[str, str]]:
    """(config key, head name) for every head the config names: validation.headsets' heads, and
    universal.heads' of ``model`` (of every model when None)."""
    validation, given = config["validation"], config.get("universal", {}).get("heads", {})
    named = [(f"validation.headsets[{i}]", head) for i, headset in enumerate(validation.get("headsets") or [])
             for head in headset.split("+")]
    named += [(f"universal.heads.{name}[{i}]", head) for name, heads in given.items() if model in (None, name)
              for i, head in enumerate(heads or [])]
    return named


def _spelling(head: str) -> str | None:
    """What is wrong with a head name's spelling (:func:`headloc.heads.parse_head`); None when it parses."""
    try:
        parse_head(head)
    except ValueError as error:
        return str(error)
    return None


def check_head_names(config: dict) -> list[Problem]:
    """Every head the config names is spelled as headloc writes heads (``L1H5``, not ``L01H05``):
    names are compared as text where rankings are filtered, so another spelling would never match."""
    return [(key, problem) for key, head in named_heads(config) if (problem := _spelling(head))]


def check_caps(config: dict, model: str, geometry: HeadGeometry) -> list[Problem]:
    """Each searched task's budgets (``n_masks`` and ``search.budgets``) suffice for each of its
    methods that needs a least budget on this model (:attr:`headloc.methods.Method.least_budget`:
    group testing must score the baseline and one whole partition)."""
    problems = []
    for name in searched_tasks(config):
        settings = task_settings(config, name)
        caps = [(setting_key(config, name, "n_masks"), settings.n_masks),
                *(("search.budgets", budget) for budget in settings.budgets)]
        for method in dict.fromkeys(settings.methods):
            spec = search_methods.get(method)
            if spec.least_budget is None:
                continue
            least, setting, need = spec.least_budget(geometry.total, settings.top_k, settings.options_of(spec))
            for key, cap in caps:
                give = "every budget" if key == "search.budgets" else "n_masks"
                if cap < least:
                    problems.append((key, f"{cap} is too small for {method} on {model} ({geometry.total} heads, "
                                          f"{setting}): it needs at least {least} {need}; give {give} >= {least}"))
    return problems


def _outside(head: tuple[int, int], geometry: HeadGeometry) -> bool:
    layer, index = head
    return layer >= geometry.n_layers or index >= geometry.n_heads
