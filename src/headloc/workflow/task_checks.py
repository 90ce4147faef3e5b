"""The config's checks of one task, read from its YAML: defined, its templates, the metric and
filter it reports and their direction, its documents and chat template, the identification subset's
size; each returns its problems as (key, text) pairs. :func:`headloc.workflow.config.check_config`
runs them."""

from __future__ import annotations

import json
from pathlib import Path

from headloc.data.documents import defining_file, reads_own_documents, template_errors
from headloc.data.task_scoring import metric_direction, reported_filters, reported_metrics
from headloc.model.gguf_header import read_gguf_metadata
from headloc.model.loading import resolve_source
from headloc.workflow.configured import searched_tasks, task_settings
from headloc.workflow.task_lookup import TaskLookup, TaskYaml, lm_eval_tasks
from headloc.workflow.method_checks import check_budgets, check_method_options, check_methods
from headloc.workflow.schema import Problem


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


def check_metric(metric: str, task: str, path, task_config: dict, *, complete: bool = True,
                 subject: str | None = None):
    """Whether lm-eval task ``task`` (YAML ``path``, read as ``task_config``) reports ``metric``.

    Returns (the metric key to score, a note, a problem): the key is ``metric`` itself, or, when
    ``complete`` and ``metric`` names no filter while the task reports its metrics under a single
    filter other than ``none``, ``metric,<that filter>`` with a note saying so. The problem (None
    when it reports it) lists the ``metric,filter`` keys the task reports; it starts with ``subject``
    (default: ``metric`` quoted). Only what the YAML tells is checked: the filter part always
    (``filter_list`` names, ``none`` without one), the metric part unless only a run can tell
    (:func:`headloc.data.task_scoring.reported_metrics`: process_results, a Python metric); a Python task
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
