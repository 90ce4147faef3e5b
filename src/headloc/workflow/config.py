"""Config checks that run before any job: the JSON schema, then every rule across keys.

``check_workflow_config`` is what the Snakefile calls when it parses a config (rules/common.smk),
so what it raises is what a bad config's ``snakemake -n`` prints. It runs, in order:
``validate_config`` (:mod:`headloc.workflow.schema`), which checks the config against
``config/schema.yaml`` (filling in defaults) and words each error as ``config <key.path>: <bad
value> ...; expected ...``; ``model_geometries``, which resolves every model's source and reads its layers and heads offline; ``complete_metrics``,
the one normalisation, which completes bare metric names in place (before the digest is taken);
``check_config``, which checks what the schema cannot express, one small named check at a time
(``check_gen_tasks``, ``check_scoring``, ``check_heads``, ...: each returns its problems as
(key, text) pairs): names that must refer to configured tasks or models, head names inside each
model, top-k against the number of heads, a sequential search's budget against the least it
runs with on each model (``check_caps``), subset sizes against dataset sizes, each task's Jinja
templates and the ``metric,filter`` keys its YAML reports; and the experiment plan
(``headloc.workflow.plan.Plan``), which rejects a plan that would wait on itself.
Each raises ValueError listing every problem found, one per line.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

from headloc.data.documents import (
    GOLD_DECLARATION,
    defining_file,
    gold_problem,
    is_fraction,
    metric_direction,
    reads_own_documents,
    reported_filters,
    reported_metrics,
    template_errors,
)
from headloc import methods as search_methods
from headloc.heads import HeadGeometry, parse_head
from headloc.model.memory import resolve_rows
from headloc.model.loading import read_gguf_metadata, resolve_source, source_geometry
from headloc.search.budget import suggested_masks
from headloc.model.architectures import ablation_problem
from headloc.workflow.configured import searched_tasks, setting_key, task_settings
from headloc.workflow.schema import validate_config
from headloc.workflow.task_lookup import TaskLookup, TaskYaml, lm_eval_tasks


# ------------------------------------------------------------------ the workflow's checks


def check_workflow_config(config: dict, schema_path) -> None:
    """Every check the Snakefile makes on ``config`` when it parses it, before any job exists.

    Changes the config in place, as the workflow's config then has it (and its digest hashes): the
    schema's defaults filled in, bare metric names completed (:func:`complete_metrics`, a note on
    stderr each). Raises ValueError with the message a dry run of the workflow prints for the same
    config: the schema's errors; "config models.<name>.source: ..." for a model that does not
    resolve; the cross-key rules of :func:`check_config` (head checks skipped for models unknown
    offline, such as hub ids not in the local cache); and the plan's own check
    (:class:`headloc.workflow.plan.Plan`).
    """
    from headloc.workflow.plan import Plan  # imports pandas: only when checking a whole workflow config

    given = copy.deepcopy(config)  # as written: the schema's defaults are no keys the user set
    validate_config(config, schema_path)
    geometries = model_geometries(config)
    tasks = TaskLookup(config)
    for note in dict.fromkeys(complete_metrics(config, tasks)):
        print(note, file=sys.stderr)
    check_config(config, geometries, tasks)
    for note in ignored_notes(given, config):
        print(note, file=sys.stderr)
    Plan(config)


# ------------------------------------------------------------------ geometries


def model_geometries(config: dict) -> dict:
    """model name -> HeadGeometry, read offline without loading weights; None where unknown (uncached hub ids).

    Raises ValueError "config models.<name>.source: ..." for a model name that does not resolve.
    """
    geometries = {}
    for name, spec in config["models"].items():
        try:
            source = resolve_source(spec["source"])
            found = source_geometry(source)  # also checks that a GGUF file is complete
        except ValueError as error:
            raise ValueError(f"config models.{name}.source: {error}") from None
        settings = model_settings(source)
        problem = ablation_problem(settings) if settings is not None else None
        if problem:
            raise ValueError(f"config models.{name}.source: {spec['source']!r}: {problem}")
        geometries[name] = HeadGeometry(*found) if found else None
    return geometries


def model_settings(source) -> dict | None:
    """A checkpoint folder's config.json, or a hub model's from the local cache; None when it cannot
    be read offline (an uncached hub id: its jobs check it when they load it) or for a GGUF file
    (transformers converts only architectures it maps to decoders)."""
    if source.form == "directory":
        return json.loads((Path(source.location) / "config.json").read_text())
    if source.form == "gguf":
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(source.location, "config.json")
    return json.loads(Path(cached).read_text()) if isinstance(cached, str) and Path(cached).is_file() else None


def has_chat_template(source) -> bool | None:
    """Whether a model's tokenizer has a chat template, read offline; None when unknown (hub model)."""
    if source.form == "gguf":
        return bool(read_gguf_metadata(source.location).get("tokenizer.chat_template"))
    if source.form == "directory":
        folder = Path(source.location)
        if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
            return True
        settings = folder / "tokenizer_config.json"
        return settings.is_file() and bool(json.loads(settings.read_text()).get("chat_template"))
    return None


# ------------------------------------------------------------------ normalisation


def complete_metrics(config: dict, tasks: TaskLookup | None = None) -> list[str]:
    """Complete each task's bare metric names in place, before the config's digest is taken; the
    notes saying so.

    A ``metric`` (``id_metric``) named without its filter, on a task whose metrics all come under one
    filter other than ``none``, becomes ``metric,<that filter>`` (``exact_match`` ->
    ``exact_match,first-number``; :func:`check_metric`), so the jobs get the key the task reports and
    the digest hashes what runs. Tasks the checks refuse are left as they are.
    """
    tasks = tasks or TaskLookup(config)
    notes = []
    for name, spec in config["tasks"].items():
        if tasks.defined_as(spec["lm_eval_task"]) != "task":
            continue
        read = tasks.read(spec["lm_eval_task"])
        given = spec.get("metric") or "acc"
        completed, note, _ = check_metric(given, *read)
        notes += [f"note: config tasks.{name}.metric: {note}"] if note else []
        if completed != given:
            spec["metric"] = completed
        scorer = tasks.scorer(spec, read)
        if scorer and spec.get("id_metric"):
            spec["id_metric"], note, _ = check_metric(spec["id_metric"], *scorer)
            notes += [f"note: config tasks.{name}.id_metric: {note}"] if note else []
    return notes


# ------------------------------------------------------------------ cross-key rules

Problem = tuple[str, str]  # (config key, what is wrong and what is valid): "config <key>: <text>"


def check_config(config: dict, geometries: dict, tasks: TaskLookup | None = None) -> None:
    """Every rule of a validated config (defaults filled in) that the JSON schema cannot express.

    ``geometries`` maps each model to a :class:`headloc.heads.HeadGeometry`, or None when it is
    unknown offline (such models skip the head checks; their jobs check heads when they load the
    model). ``tasks`` finds and reads the task YAMLs (default: a new :class:`TaskLookup`).

    Each task's YAML (``lm_eval_task``, and ``id_task``) is read: every template lm-eval renders with
    Jinja must parse, and ``metric`` (``id_metric``) must be a ``metric,filter`` it reports
    (:func:`check_metric`; a bare name that :func:`complete_metrics` would complete passes). The
    config is not changed. Notes (too few masks for a model: :func:`budget_notes`) go to stderr;
    ValueError lists every problem, one a line, in the order the checks run.
    """
    tasks = tasks or TaskLookup(config)
    problems = [*check_searched_tasks(config), *check_gen_tasks(config), *check_task_lists(config),
                *check_masks_per_pass(config), *check_report_choices(config), *check_include_path(config)]
    defined = [name for name, spec in config["tasks"].items() if tasks.defined_as(spec["lm_eval_task"]) == "task"]
    for name in config["tasks"]:
        problems += check_task(config, name, tasks) if name in defined else check_defined(config, name, tasks)
    problems += [*check_mirror(config), *check_universal_models(config), *check_export(config),
                 *check_head_names(config)]
    for model, geometry in geometries.items():
        problems += [*check_heads(config, model, geometry), *check_caps(config, model, geometry)] if geometry else []
    for note in dict.fromkeys([*budget_notes(config, geometries, defined), *id_docs_notes(config)]):
        print(note, file=sys.stderr)
    if problems:
        raise ValueError("\n".join(dict.fromkeys(f"config {key}: {text}" for key, text in problems)))


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
                             "metric is a fraction (FRACTION_METRICS in headloc.data.documents) or relative tasks"))
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
        per_pass, rows = spec.get("masks_per_pass", 1), resolve_rows(spec.get("batch_size", 16), spec.get("device", "cpu"))
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

# ------------------------------------------------------------------ one task


def check_defined(config: dict, name: str, tasks: TaskLookup) -> list[Problem]:
    """A task's lm_eval_task that is no single task: defined nowhere, or an lm-eval group."""
    task, key = config["tasks"][name]["lm_eval_task"], f"tasks.{name}.lm_eval_task"
    if tasks.defined_as(task) == "group":
        return [(key, f"{task!r} is an lm-eval group, not one task; headloc scores one task per entry of "
                      "tasks: name one of its subtasks (one entry each)")]
    return [(key, f"{task!r} is not a task of {', '.join(map(str, tasks.task_folders))} nor of lm-eval's registry; "
                  "put its YAML in a folder and add the folder to the config key include_path "
                  f"(headloc's own tasks: {', '.join(lm_eval_tasks())})")]


def check_task(config: dict, name: str, tasks: TaskLookup) -> list[Problem]:
    """Every rule of one task whose lm_eval_task is defined, in this order: its templates, what scores
    it, its documents, its chat template, its identification subset, its methods, their options and
    its budgets."""
    read = tasks.read(config["tasks"][name]["lm_eval_task"])
    return [*check_templates(f"tasks.{name}.lm_eval_task", read), *check_scoring(config, name, read, tasks),
            *check_documents(config, name, read), *check_chat(config, name), *check_id_docs(config, name),
            *check_methods(config, name, read), *check_method_options(config, name), *check_budgets(config, name)]


def check_templates(key: str, read: TaskYaml) -> list[Problem]:
    """Every template lm-eval renders with Jinja parses (its YAML or the include that sets it named)."""
    problems = []
    for template_key, message in template_errors(read.yaml):
        source = defining_file(read.path, template_key.split(".")[0].split("[")[0])
        where = "" if source == read.path else f" (set in its include {source})"
        problems.append((key, f"task {read.task} ({read.path}) key {template_key}{where}: Jinja syntax error: "
                              f"{message}"))
    return problems


def check_scoring(config: dict, name: str, read: TaskYaml, tasks: TaskLookup) -> list[Problem]:
    """What scores the task: ``metric`` is reported by it, ``id_task`` is a variant reading the same
    documents, ``id_metric`` (or ``metric``, when null) is reported by the id_task, and each
    declares a direction."""
    spec = config["tasks"][name]
    scored, problems = _reported(f"tasks.{name}.metric", spec.get("metric") or "acc", read)
    scorer = tasks.scorer(spec, read)
    problems += check_id_task(name, spec, read, scorer, tasks)
    id_metric = None
    if scorer and spec.get("id_metric"):
        id_metric, found = _reported(f"tasks.{name}.id_metric", spec["id_metric"], scorer)
        problems += found
    elif scorer and scorer.task != read.task:  # id_metric null: id_task scores with metric
        problems += _reported(f"tasks.{name}.id_metric", scored, scorer, complete=False,
                              subject=f"null (metric {scored!r})")[1]
    problems += check_direction(f"tasks.{name}.metric", scored, read)
    if scorer and (scorer.task != read.task or id_metric):
        problems += check_direction(f"tasks.{name}.id_metric", id_metric or scored, scorer)
    return problems


def _reported(key: str, metric: str, read: TaskYaml, **options) -> tuple[str, list[Problem]]:
    """The metric key scored (a bare name completed as :func:`complete_metrics` does) and the problem
    of a metric the task does not report."""
    resolved, _, text = check_metric(metric, *read, **options)
    return resolved, [(key, text)] if text else []


def check_id_task(name: str, spec: dict, read: TaskYaml, scorer: TaskYaml | None, tasks: TaskLookup) -> list[Problem]:
    """An id_task other than the task itself is a task, its templates parse, and it loads its
    documents as the task does."""
    id_task, key = spec.get("id_task"), f"tasks.{name}.id_task"
    if not id_task or id_task == read.task:
        return []
    if scorer is None:
        return [(key, f"{id_task!r} is not a task of {', '.join(map(str, tasks.task_folders))} nor of lm-eval's "
                      f"registry; expected a variant of {read.task} that reads the same documents (e.g. "
                      f"{read.task}_margin or a task of include_path)")]
    problems = check_templates(key, scorer)
    if reads_own_documents(scorer.yaml) != reads_own_documents(read.yaml):
        problems.append((key, f"{id_task!r} and {read.task} load their documents differently (dataset_path vs "
                              "custom_dataset); expected a variant that reads the same documents"))
    return problems


def check_direction(key: str, metric: str, read: TaskYaml) -> list[Problem]:
    """Every ranking and table follows the metric's direction: refuse a metric without one, or with
    one that is not a YAML boolean."""
    try:
        declared = metric_direction(read.yaml, metric)
    except ValueError as error:
        source = defining_file(read.path, "metric_list")
        return [(key, f"{metric!r} is read from {source}, where {error}")]
    if declared is not None:
        return []
    return [(key, f"{metric!r} of task {read.task} ({read.path}) has no declared direction: neither the task's "
                  "metric_list nor lm-eval's metric registry says whether higher is better, and every "
                  "ranking and table depends on it; expected a metric_list entry "
                  f"'- metric: {metric.split(',')[0]}' with 'higher_is_better: true' (or false)")]


def check_documents(config: dict, name: str, read: TaskYaml) -> list[Problem]:
    """data_file and dataset_kwargs only for a task whose documents headloc hands it; data_file exists."""
    spec, problems = config["tasks"][name], []
    if reads_own_documents(read.yaml):
        for option in ("data_file", "dataset_kwargs"):
            if spec.get(option):
                problems.append((f"tasks.{name}.{option}", f"task {read.task} reads its documents itself "
                                 f"(dataset_path {read.yaml.get('dataset_path')!r}), so headloc has nothing to "
                                 f"pass {option} to; set data_files and other loader options in its YAML's "
                                 "dataset_kwargs"))
    if spec.get("data_file") and not Path(spec["data_file"]).expanduser().is_file():
        problems.append((f"tasks.{name}.data_file", f"{spec['data_file']!r} does not exist; expected a JSONL file"))
    return problems


def check_chat(config: dict, name: str) -> list[Problem]:
    """A chat task needs every model's tokenizer to have a chat template (where that is known offline)."""
    if not config["tasks"][name].get("chat"):
        return []
    return [(f"tasks.{name}.chat", f"task {name} needs a chat template, but the tokenizer of model {model} "
                                   f"({spec['source']}) has none; use a chat model or set chat: false")
            for model, spec in config["models"].items() if has_chat_template(resolve_source(spec["source"])) is False]


MIN_ID_DOCS = 2  # a subset's spread (a head's interval, the noise floor) needs two documents
FEW_ID_DOCS = 10  # below this a note says how few: heads found on a handful may not carry the task


def id_subset(config: dict, name: str) -> tuple[str, int]:
    """(the config key that sets it, the size) of a task's identification subset."""
    spec = config["tasks"][name]
    subset = spec.get("id_docs") or task_settings(config).id_docs
    return (f"tasks.{name}.id_docs" if spec.get("id_docs") else "search.id_docs"), subset


def check_id_docs(config: dict, name: str) -> list[Problem]:
    """A searched task's identification subset holds at least :data:`MIN_ID_DOCS` documents and no
    more than its documents (n_docs, when set)."""
    spec = config["tasks"][name]
    key, subset = id_subset(config, name)
    if name not in searched_tasks(config):
        return []
    if subset < MIN_ID_DOCS:
        return [(key, f"{subset} document is too few to identify the heads of task {name} on: what ablating a head "
                      "does to one document cannot be told from that document's quirks, and one document has no "
                      f"spread to measure noise by; expected at least {MIN_ID_DOCS} (the demo uses 20)")]
    if spec.get("n_docs") is not None and subset > spec["n_docs"]:
        return [(key, f"{subset} is larger than tasks.{name}.n_docs = {spec['n_docs']}; expected an "
                      f"identification subset of at most {spec['n_docs']} documents")]
    return []


def id_docs_notes(config: dict) -> list[str]:
    """A note for each searched task whose identification subset holds fewer than :data:`FEW_ID_DOCS`
    documents, with the number it holds."""
    notes = []
    for name in searched_tasks(config):
        key, subset = id_subset(config, name)
        if MIN_ID_DOCS <= subset < FEW_ID_DOCS:
            notes.append(f"note: config {key}: the heads of task {name} are searched on {subset} documents; heads "
                         f"found on so few may not carry the task on others (give {FEW_ID_DOCS} or more to rely on "
                         "them; the demo uses 20)")
    return notes


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


# ------------------------------------------------------------------ one model


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


BUDGET_KEYS = ("n_masks", "budgets")  # search keys only a budgeted method reads


def ignored_notes(given: dict, config: dict) -> list[str]:
    """A note for each budget key the user set (``given``: the config as written, before the schema's
    defaults) that a searched task's methods ignore: a method that spends no mask budget (guided
    greedy, the gradient methods, random) reads neither ``n_masks`` nor ``budgets``. A note, not a
    refusal: the same config may name methods that do spend them."""
    found: dict[tuple, list[str]] = {}
    for name in searched_tasks(config):
        methods = task_settings(config, name).methods
        ignoring = [m for m in methods if not search_methods.get(m).budgeted]
        own = ((given.get("tasks") or {}).get(name) or {}).get("search") or {}
        for key in BUDGET_KEYS if ignoring else ():
            where = f"tasks.{name}.search.{key}" if key in own else f"search.{key}"
            value = own[key] if key in own else (given.get("search") or {}).get(key)
            if value is None or value == []:
                continue
            spending = tuple(m for m in methods if m not in ignoring)
            found.setdefault((where, repr(value), tuple(ignoring), spending), []).append(name)
    notes = []
    for (where, value, ignoring, spending), names in found.items():
        used = f"; {', '.join(spending)} {'spends' if len(spending) == 1 else 'spend'} it" if spending else ""
        subject = "it spends" if len(ignoring) == 1 else "they spend"
        notes.append(f"note: config {where}: {value} is ignored for {', '.join(ignoring)} on "
                     f"{'task' if len(names) == 1 else 'tasks'} {', '.join(names)}: {subject} no mask budget "
                     f"(the budgeted methods: {', '.join(search_methods.names(budgeted=True))}){used}")
    return notes


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


def check_metric(metric: str, task: str, path, task_config: dict, *, complete: bool = True,
                 subject: str | None = None):
    """Whether lm-eval task ``task`` (YAML ``path``, read as ``task_config``) reports ``metric``.

    Returns (the metric key to score, a note, a problem): the key is ``metric`` itself, or, when
    ``complete`` and ``metric`` names no filter while the task reports its metrics under a single
    filter other than ``none``, ``metric,<that filter>`` with a note saying so. The problem (None
    when it reports it) lists the ``metric,filter`` keys the task reports; it starts with ``subject``
    (default: ``metric`` quoted). Only what the YAML tells is checked: the filter part always
    (``filter_list`` names, ``none`` without one), the metric part unless only a run can tell
    (:func:`headloc.data.documents.reported_metrics`: process_results, a Python metric); a Python task
    class passes unchecked.
    """
    metrics, filters = reported_metrics(task_config), reported_filters(task_config)
    subject = subject or repr(metric)
    if filters is None:
        return metric, None, None
    name, comma, filter_name = metric.partition(",")
    note = None
    if not comma:
        filter_name = "none"
        if complete and len(filters) == 1 and filters != ["none"] and (metrics is None or name in metrics):
            filter_name = filters[0]
            note = (f"{metric!r} read as '{name},{filter_name}': task {task} reports its metrics under one "
                    f"filter, {filter_name} ({path})")
            metric = f"{name},{filter_name}"
    if filter_name in filters and (metrics is None or name in metrics):
        return metric, note, None
    if metrics is None:
        return metric, None, (f"{subject} is not reported by task {task} ({path}) under filter {filter_name!r}; "
                              f"valid filters: {', '.join(filters)} (e.g. {name},{filters[0]}; its metric names "
                              "are known only when it runs)")
    valid = ", ".join(f"{m},{f}" for f in filters for m in metrics)
    where = f" under filter {filter_name!r}" if name in metrics else ""
    return metric, None, f"{subject} is not reported by task {task} ({path}){where}; valid: {valid}"
