"""Config checks that run before any job: the JSON schema, then every rule across keys.

``check_workflow_config`` is what the Snakefile calls when it parses a config (rules/common.smk),
so what it raises is what a bad config's ``snakemake -n`` prints. It runs, in order:
``validate_config`` (:mod:`headloc.workflow.schema`), which checks the config against
``config/schema.yaml`` (filling in defaults) and words each error as ``config <key.path>: <bad
value> ...; expected ...``; ``model_geometries``, which resolves every model's source and reads its layers and heads offline; ``complete_metrics``,
the one normalisation, which completes bare metric names in place (before the digest is taken);
``check_config``, which checks what the schema cannot express, one small named check at a time
(``check_gen_tasks``, ``check_scoring``, ``check_heads``, ...: each returns its problems as
(key, text) pairs; the rules across keys in :mod:`headloc.workflow.key_checks`, one task's in
:mod:`headloc.workflow.task_checks`, its methods' in :mod:`headloc.workflow.method_checks`): names that must refer to configured tasks or models, head names inside each
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

from headloc.heads import HeadGeometry
from headloc.model.geometry import source_geometry
from headloc.model.loading import resolve_source
from headloc.model.architectures import ablation_problem
from headloc.workflow.schema import validate_config
from headloc.workflow.task_lookup import TaskLookup
from headloc.workflow.key_checks import (check_caps, check_export, check_gen_tasks, check_head_names, check_heads,
                                         check_include_path, check_masks_per_pass, check_mirror, check_report_choices,
                                         check_searched_tasks, check_task_lists, check_universal_models)
from headloc.workflow.method_checks import budget_notes, ignored_notes
from headloc.workflow.task_checks import check_defined, check_metric, check_task, id_docs_notes


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
