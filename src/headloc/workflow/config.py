"""Config checks that run before any job: the JSON schema, then every rule across keys.

``check_workflow_config`` is what the Snakefile calls when it parses a config (rules/common.smk),
so what it raises is what a bad config's ``snakemake -n`` prints. It runs, in order:
``validate_config``, which checks the config against ``config/schema.yaml`` (filling in defaults)
and words each error as ``config <key.path>: <bad value> ...; expected ...``; ``model_geometries``,
which resolves every model's source and reads its layers and heads offline; ``check_config``, which
checks what the schema cannot express: names that must refer to configured tasks or models, head
names inside each model, top-k against the number of heads, subset sizes against dataset sizes,
each task's Jinja templates and the ``metric,filter`` keys its YAML reports; and the experiment
plan (``headloc.workflow.plan.Plan``), which rejects a plan that would wait on itself.
Each raises ValueError listing every problem found, one per line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from headloc.data.documents import (
    defined_tasks,
    defining_file,
    is_fraction,
    lm_eval_tasks_dir,
    load_task_yaml,
    metric_direction,
    reads_own_documents,
    reported_filters,
    reported_metrics,
    task_yaml,
    template_errors,
)
from headloc import methods as search_methods
from headloc.heads import HeadGeometry, parse_head
from headloc.data import TASKS_DIR
from headloc.model.memory import resolve_rows
from headloc.model.loading import read_gguf_metadata, resolve_source, source_geometry
from headloc.search.budget import suggested_masks
from headloc.model.architectures import ablation_problem



# ------------------------------------------------------------------ the workflow's checks


def check_workflow_config(config: dict, schema_path) -> None:
    """Every check the Snakefile makes on ``config`` when it parses it, before any job exists.

    Fills in the schema's defaults in place, as the workflow's config then has them. Raises
    ValueError with the message a dry run of the workflow prints for the same config: the schema's
    errors; "config models.<name>.source: ..." for a model that does not resolve; the cross-key
    rules of :func:`check_config` (head checks skipped for models unknown offline, such as hub ids
    not in the local cache); and the plan's own check (:class:`headloc.workflow.plan.Plan`).
    """
    from headloc.workflow.plan import Plan  # imports pandas: only when checking a whole workflow config

    validate_config(config, schema_path)
    check_config(config, model_geometries(config))
    Plan(config)


# ------------------------------------------------------------------ schema


def validate_config(config: dict, schema_path) -> None:
    """Validate ``config`` against the JSON schema at ``schema_path``, setting defaults in place."""
    from jsonschema import Draft202012Validator, validators

    schema = with_method_enums(yaml.safe_load(Path(schema_path).read_text(encoding="utf-8")))
    base = Draft202012Validator
    properties = base.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if "default" in subschema:
                    instance.setdefault(name, _copy(subschema["default"]))
        yield from properties(validator, props, instance, schema)

    validator = validators.extend(base, {"properties": set_defaults})(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise ValueError("\n".join(dict.fromkeys(_describe(error) for error in errors)))


def with_method_enums(schema: dict) -> dict:
    """The schema with its method enums filled in from the registry (headloc.methods): every
    registered method for ``search.methods`` and ``validation.method``, the methods whose budgets
    nest for ``tuning.method``. The schema file names none, so a new method module needs no edit
    there."""
    schema["$defs"]["method"]["enum"] = search_methods.names()
    nested = [name for name in search_methods.names() if search_methods.get(name).nested]
    schema["properties"]["tuning"]["properties"]["method"]["enum"] = nested
    return schema


def _copy(value):
    return yaml.safe_load(yaml.safe_dump(value)) if isinstance(value, (dict, list)) else value


def key_path(parts) -> str:
    """``['models', 'x', 'dtype'] -> 'models.x.dtype'``; list indices as ``[0]``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error) -> str:
    key = key_path(error.absolute_path)
    where = f"config {key}" if key else "config"
    value, schema, kind = error.instance, error.schema, error.validator
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(value) - set(allowed))
        return (f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; valid keys: {', '.join(allowed)}")
    if kind == "required":
        missing = [name for name in error.validator_value if name not in value]
        return f"{where}: missing key {', '.join(map(repr, missing))}; required: {', '.join(schema['required'])}"
    if kind in ("minProperties", "minItems"):
        return f"{where}: {value!r} is empty; expected at least {error.validator_value} entr" + (
            "y" if error.validator_value == 1 else "ies")
    if kind == "uniqueItems":
        return f"{where}: {value!r} repeats an item; expected each item at most once"
    if kind == "propertyNames":
        return f"{where}: bad name ({error.message}); expected names matching {schema['propertyNames']['pattern']}"
    bound = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    if kind in bound:
        return f"{where}: {value!r} is not {bound[kind]} {error.validator_value}; expected {expected(schema)}"
    if kind in ("enum", "type", "anyOf", "oneOf", "pattern", "const"):
        return f"{where}: {value!r} is not valid; expected {expected(schema)}"
    return f"{where}: {error.message}"


_ARTICLE = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
            "array": "a list", "object": "a mapping", "null": "null"}


def expected(schema: dict) -> str:
    """What a schema accepts, in words: 'a number in (0, 1)', 'one of: cv', 'an integer >= 1 or null'."""
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(expected(sub) for sub in schema.get("anyOf", schema.get("oneOf")))
    if "enum" in schema:
        return "one of: " + ", ".join(str(v) for v in schema["enum"])
    if "pattern" in schema:
        return f"a string matching {schema['pattern']}"
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    words = []
    for kind in types:
        word = _ARTICLE.get(kind, kind)
        if kind in ("integer", "number"):
            word += _range(schema)
        elif kind == "array" and isinstance(schema.get("items"), dict):
            items = expected(schema["items"])
            word += f" (items: {items})" if items else ""
        words.append(word)
    return " or ".join(words)


def _range(schema: dict) -> str:
    low = ("(", schema["exclusiveMinimum"]) if "exclusiveMinimum" in schema else (
        ("[", schema["minimum"]) if "minimum" in schema else None)
    high = (")", schema["exclusiveMaximum"]) if "exclusiveMaximum" in schema else (
        ("]", schema["maximum"]) if "maximum" in schema else None)
    if low and high:
        return f" in {low[0]}{low[1]}, {high[1]}{high[0]}"
    if low:
        return f" {'>' if low[0] == '(' else '>='} {low[1]}"
    if high:
        return f" {'<' if high[0] == ')' else '<='} {high[1]}"
    return ""


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
    if source.kind == "directory":
        return json.loads((Path(source.location) / "config.json").read_text())
    if source.kind == "gguf":
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(source.location, "config.json")
    return json.loads(Path(cached).read_text()) if isinstance(cached, str) and Path(cached).is_file() else None


def task_folders(config: dict) -> list[Path]:
    """Folders of task YAMLs headloc hands lm-eval: its own tasks, then ``include_path`` (absolute)."""
    return [TASKS_DIR, *(Path(folder).expanduser().resolve() for folder in config.get("include_path") or [])]


def lm_eval_tasks(folders=(TASKS_DIR,)) -> list[str]:
    """Names of the lm-eval tasks (not groups) defined in ``folders``."""
    return sorted(name for name, kind in defined_tasks(folders).items() if kind == "task")


def has_chat_template(source) -> bool | None:
    """Whether a model's tokenizer has a chat template, read offline; None when unknown (hub model)."""
    if source.kind == "gguf":
        return bool(read_gguf_metadata(source.location).get("tokenizer.chat_template"))
    if source.kind == "directory":
        folder = Path(source.location)
        if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
            return True
        settings = folder / "tokenizer_config.json"
        return settings.is_file() and bool(json.loads(settings.read_text()).get("chat_template"))
    return None


# ------------------------------------------------------------------ cross-key rules


def check_config(config: dict, geometries: dict) -> None:
    """Every rule of a validated config (defaults filled in) that the JSON schema cannot express.

    ``geometries`` maps each model to a :class:`headloc.heads.HeadGeometry`, or None when it is
    unknown offline (such models skip the head checks; their jobs check heads when they load the
    model).

    Each task's YAML (``lm_eval_task``, and ``id_task``) is read: every template lm-eval renders with
    Jinja must parse, and ``metric`` (``id_metric``) must be a ``metric,filter`` it reports
    (:func:`check_metric`). A metric named without its filter, on a task whose metrics all come
    under one filter other than ``none``, is completed in place (``exact_match`` ->
    ``exact_match,first-number``), so the jobs get the key the task reports; a note on stderr says so.
    """
    problems = []
    notes = []
    budgets = {}  # n_masks -> the searched tasks whose mask designs spend it

    def problem(key, text):
        problems.append(f"config {key}: {text}")

    tasks = config["tasks"]
    models = config["models"]
    search = config["search"]
    validation = config["validation"]
    names = list(tasks)
    localized = [t for t in names if tasks[t].get("localize", True)]
    if not localized:
        problem("tasks", f"no task has localize: true ({', '.join(names)} are all evaluation-only); "
                         "expected at least one task to search heads on")

    def task_names(key, value, pool, what):
        for i, name in enumerate(value or []):
            if name not in pool:
                problem(f"{key}[{i}]", f"{name!r} is not {what}; valid: {', '.join(pool) or '(none)'}")

    task_names("validation.gen_tasks", validation.get("gen_tasks"), names, "a configured task")
    for i, name in enumerate(validation.get("gen_tasks") or []):
        spec = tasks.get(name, {})
        if spec and not spec.get("relative") and not is_fraction(spec.get("metric") or "acc"):
            problem(f"validation.gen_tasks[{i}]", f"{name!r} is scored by {spec['metric']!r}, shown in its own unit, "
                                                  "but Delta Gen averages changes in percent; expected tasks whose "
                                                  "metric is a fraction (FRACTION_METRICS in headloc.data.documents) "
                                                  "or relative tasks")
    knowledge = config.get("knowledge", {})
    task_names("knowledge.tasks", knowledge.get("tasks"), localized, "a searched task (localize: true)")
    task_names("knowledge.eval_tasks", knowledge.get("eval_tasks"), names, "a configured task")
    tuning = config.get("tuning", {})
    task_names("tuning.tasks", tuning.get("tasks"), localized, "a searched task (localize: true)")
    min_tasks = knowledge.get("min_tasks")
    if min_tasks is not None and min_tasks > len(knowledge.get("tasks") or []):
        problem("knowledge.min_tasks", f"{min_tasks} is larger than the {len(knowledge.get('tasks') or [])} "
                                       f"knowledge.tasks; expected 1..{len(knowledge.get('tasks') or [])} or null")

    for name, spec in models.items():
        per_pass, rows = spec.get("masks_per_pass", 1), resolve_rows(spec.get("batch_size", 16), spec.get("device", "cpu"))
        if per_pass > rows:
            problem(f"models.{name}.masks_per_pass", f"{per_pass} is larger than batch_size {rows}, the rows "
                                                    f"of one forward pass; expected 1..{rows}")

    report = config.get("report", {})
    if report.get("model") is not None and report["model"] not in models:
        problem("report.model", f"{report['model']!r} is not a configured model; valid: {', '.join(models)} or null")
    capabilities = list(dict.fromkeys(tasks[t].get("capability") or t for t in localized))
    if report.get("capability") is not None and report["capability"] not in capabilities:
        problem("report.capability", f"{report['capability']!r} is not the capability of a searched task; "
                                     f"valid: {', '.join(capabilities) or '(none)'} or null")

    folders = task_folders(config)
    for i, folder in enumerate(config.get("include_path") or []):
        if not Path(folder).expanduser().is_dir():
            problem(f"include_path[{i}]", f"{folder!r} is not a directory; expected a folder of lm-eval task YAMLs")
    local = defined_tasks(folders)
    registry = {}
    if any(spec[key] not in local for spec in tasks.values() for key in ("lm_eval_task", "id_task")
           if spec.get(key)):
        registry = defined_tasks([lm_eval_tasks_dir()])
    yamls = {}

    def yaml_of(task):
        if task not in yamls:
            yamls[task] = task_yaml(task, [*folders, lm_eval_tasks_dir()])
        return yamls[task]

    def templates(key, task, path, task_config):
        for template_key, message in template_errors(task_config):
            source = defining_file(path, template_key.split(".")[0].split("[")[0])
            where = "" if source == path else f" (set in its include {source})"
            problem(key, f"task {task} ({path}) key {template_key}{where}: Jinja syntax error: {message}")

    def metric(key, value, task, path, task_config, complete=True, subject=None):
        """The metric key to score (a bare name completed when ``complete``), noting or refusing."""
        resolved, note, text = check_metric(value, task, path, task_config, complete=complete, subject=subject)
        if note:
            notes.append(f"note: config {key}: {note}")
        if text:
            problem(key, text)
        return resolved

    def direction(key, value, task, path, task_config):
        """Every ranking and table follows the metric's direction: refuse a metric without one."""
        if metric_direction(task_config, value) is None:
            name = value.split(",")[0]
            problem(key, f"{value!r} of task {task} ({path}) has no declared direction: neither the task's "
                         "metric_list nor lm-eval's metric registry says whether higher is better, and every "
                         "ranking and table depends on it; expected a metric_list entry "
                         f"'- metric: {name}' with 'higher_is_better: true' (or false)")

    for name, spec in tasks.items():
        task = spec["lm_eval_task"]
        kind = local.get(task) or registry.get(task)
        key = f"tasks.{name}.lm_eval_task"
        if kind is None:
            problem(key, f"{task!r} is not a task of {', '.join(map(str, folders))} nor of lm-eval's registry; "
                         f"put its YAML in a folder and add the folder to the config key include_path "
                         f"(headloc's own tasks: {', '.join(lm_eval_tasks())})")
            continue
        if kind == "group":
            problem(key, f"{task!r} is an lm-eval group, not one task; headloc scores one task per entry of "
                         "tasks: name one of its subtasks (one entry each)")
            continue
        path = yaml_of(task)
        task_config = load_task_yaml(path)
        templates(key, task, path, task_config)
        given = spec.get("metric") or "acc"
        scored = metric(f"tasks.{name}.metric", given, task, path, task_config)
        if scored != given:
            spec["metric"] = scored
        id_task = spec.get("id_task")
        scorer = (task, path, task_config)  # what scores the identification subset
        if id_task and id_task != task:
            id_kind = local.get(id_task) or registry.get(id_task)
            if id_kind != "task":
                scorer = None
                problem(f"tasks.{name}.id_task", f"{id_task!r} is not a task of {', '.join(map(str, folders))} "
                                                 "nor of lm-eval's registry; expected a variant of "
                                                 f"{task} that reads the same documents (e.g. {task}_margin "
                                                 "or a task of include_path)")
            else:
                id_config = load_task_yaml(yaml_of(id_task))
                scorer = (id_task, yaml_of(id_task), id_config)
                templates(f"tasks.{name}.id_task", *scorer)
                if reads_own_documents(id_config) != reads_own_documents(task_config):
                    problem(f"tasks.{name}.id_task", f"{id_task!r} and {task} load their documents differently "
                                                     "(dataset_path vs custom_dataset); expected a variant that "
                                                     "reads the same documents")
        if scorer and spec.get("id_metric"):
            spec["id_metric"] = metric(f"tasks.{name}.id_metric", spec["id_metric"], *scorer)
        elif scorer and scorer[0] != task:  # id_metric null: id_task scores with metric
            metric(f"tasks.{name}.id_metric", scored, *scorer, complete=False, subject=f"null (metric {scored!r})")
        direction(f"tasks.{name}.metric", scored, task, path, task_config)
        if scorer and (scorer[0] != task or spec.get("id_metric")):
            direction(f"tasks.{name}.id_metric", spec.get("id_metric") or scored, *scorer)
        if reads_own_documents(task_config):
            for option in ("data_file", "dataset_kwargs"):
                if spec.get(option):
                    problem(f"tasks.{name}.{option}", f"task {task} reads its documents itself (dataset_path "
                                                      f"{task_config.get('dataset_path')!r}), so headloc has "
                                                      f"nothing to pass {option} to; set data_files and other "
                                                      "loader options in its YAML's dataset_kwargs")
        if spec.get("data_file") and not Path(spec["data_file"]).expanduser().is_file():
            problem(f"tasks.{name}.data_file", f"{spec['data_file']!r} does not exist; expected a JSONL file")
        if spec.get("chat"):
            for model, model_spec in models.items():
                if has_chat_template(resolve_source(model_spec["source"])) is False:
                    problem(f"tasks.{name}.chat", f"task {name} needs a chat template, but the tokenizer of model "
                                                  f"{model} ({model_spec['source']}) has none; use a chat model or "
                                                  f"set chat: false")
        subset = spec.get("id_docs") or search["id_docs"]
        key = f"tasks.{name}.id_docs" if spec.get("id_docs") else "search.id_docs"
        if name in localized and spec.get("n_docs") is not None and subset > spec["n_docs"]:
            problem(key, f"{subset} is larger than tasks.{name}.n_docs = {spec['n_docs']}; expected an "
                         f"identification subset of at most {spec['n_docs']} documents")
        overrides = spec.get("search") or {}
        methods = overrides.get("methods") or search["methods"]
        n_masks = overrides.get("n_masks") or search["n_masks"]
        mkey = f"tasks.{name}.search.methods" if overrides.get("methods") else "search.methods"
        if name in localized and "method" in validation and validation["method"] not in methods:
            problem(mkey, f"{methods} lacks validation.method {validation['method']!r}, whose heads every "
                          f"table uses; expected the methods of task {name} to include it")
        gradient = [m for m in methods if search_methods.get(m).kind == "gradient"]
        if name in localized and gradient and task_config.get("output_type") == "loglikelihood_rolling":
            scored = [m for m in search_methods.names() if search_methods.get(m).scored]
            problem(mkey, f"{', '.join(gradient)} differentiate a gold continuation's log-likelihood, and task "
                          f"{task} ({path}) has output_type loglikelihood_rolling, which has no gold continuation; "
                          f"expected methods that score masks for it: {', '.join(scored)}")
        too_big = [b for b in search.get("budgets", []) if b >= n_masks]
        spends_masks = name in localized and any(search_methods.get(m).budgeted for m in methods)
        if spends_masks and too_big:
            problem("search.budgets", f"{too_big} not below the {n_masks} masks of task {name}; expected budgets "
                                      f"smaller than n_masks (each is cut from the first rows of that design)")
        if spends_masks and search["chunks"] > n_masks:
            problem("search.chunks", f"{search['chunks']} is larger than the {n_masks} masks of task {name}; "
                                     f"expected at most {n_masks} scoring jobs per search")
        if spends_masks:
            budgets.setdefault(n_masks, []).append(name)

    mirror = config.get("data", {}).get("mirror")
    if mirror and not Path(mirror).expanduser().is_dir():
        problem("data.mirror", f"{mirror!r} is not a directory; expected a local data mirror or null (the hub)")

    given = config.get("universal", {}).get("heads", {})
    for model in given:
        if model not in models:
            problem(f"universal.heads.{model}", f"{model!r} is not a configured model; valid: {', '.join(models)}")
    for model, geometry in geometries.items():
        if geometry is None:
            continue
        total = geometry.n_layers * geometry.n_heads
        inside = f"model {model} has layers 0..{geometry.n_layers - 1} and heads 0..{geometry.n_heads - 1}"
        for i, headset in enumerate(validation.get("headsets") or []):
            for head in headset.split("+"):
                layer, index = parse_head(head)
                if layer >= geometry.n_layers or index >= geometry.n_heads:
                    problem(f"validation.headsets[{i}]", f"head {head} is outside the model: {inside}")
        for i, head in enumerate(given.get(model, [])):
            layer, index = parse_head(head)
            if layer >= geometry.n_layers or index >= geometry.n_heads:
                problem(f"universal.heads.{model}[{i}]", f"head {head} is outside the model: {inside}")
        advised = suggested_masks(total, validation["top_k"])
        for n_masks, searched in sorted(budgets.items()):
            if n_masks < advised:
                notes.append(
                    f"note: config search.n_masks: {n_masks} masks for {', '.join(searched)} on model {model} "
                    f"({total} heads): on the planted-head models about {advised} masks put 95 % of "
                    f"{validation['top_k']} heads (validation.top_k) among {total} in the top "
                    f"{validation['top_k']}; fewer can miss some "
                    f"(docs/ground-truth.md, 'Budget advice')")
        for key, value in (("validation.top_k", validation["top_k"]),
                           ("universal.top_n", config.get("universal", {}).get("top_n")),
                           ("knowledge.top_n", knowledge.get("top_n"))):
            if value is not None and value > total:
                problem(key, f"{value} is larger than the {total} heads of model {model} "
                             f"({geometry.n_layers} layers x {geometry.n_heads}); expected 1..{total}")
    for note in dict.fromkeys(notes):
        print(note, file=sys.stderr)
    if problems:
        raise ValueError("\n".join(dict.fromkeys(problems)))


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
