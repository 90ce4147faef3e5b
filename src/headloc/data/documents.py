"""Task files and the documents they read: where a task is defined, and which fields its documents need.

lm-eval reads a document field in three ways in a task YAML's ``doc_to_text``, ``doc_to_target``
and ``doc_to_choice``: a bare field name (``doc_to_text: text``), a Jinja template
(``"Question: {{question}}"``), or a ``!function`` (opaque here). :func:`required_fields` collects
the fields of the first two kinds, so :func:`check_documents` can reject a document that lacks one
before any evaluation, naming the file, the line and the field; a ``!function`` or a literal
contributes nothing. Task files are also what an evaluation depends on: :func:`task_files` lists
the YAML that defines a task, what it includes, and the Python and data beside it, so the workflow
re-runs an evaluation when any of them changes.

The config check (:func:`headloc.workflow.config.check_config`) reads two more things from a task's YAML
before any job: :func:`template_errors`, the Jinja templates lm-eval would fail to parse, and
:func:`reported_metrics` / :func:`reported_filters`, the ``metric,filter`` keys the task reports
(None where only a run can tell).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import jinja2
import jinja2.meta
import numpy as np
import yaml

TEMPLATE_KEYS = ("doc_to_text", "doc_to_target", "doc_to_choice")
_DEFINES = re.compile(r"^(task|group):\s*['\"]?([\w.-]+)", re.MULTILINE)  # what a task YAML names
_FIELD = re.compile(r"^[A-Za-z_]\w*$")
_DEFINED_TEST = re.compile(r"\b([A-Za-z_]\w*)\s+is\s+(?:not\s+)?defined\b")


class _TaskLoader(yaml.SafeLoader):
    """Reads lm-eval task YAML without importing its functions (``!function`` becomes None)."""


_TaskLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def lm_eval_tasks_dir() -> Path:
    """lm-eval's own task folder (its registry), found without importing lm-eval."""
    import importlib.util

    return Path(importlib.util.find_spec("lm_eval").origin).parent / "tasks"


def _definitions(folders: Sequence[Path | str]):
    """(path, kind, name) for every ``task:`` and ``group:`` line of the YAMLs in ``folders``, in order."""
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.yaml")):
            for match in _DEFINES.finditer(path.read_text(encoding="utf-8", errors="replace")):
                yield path, match.group(1), match.group(2)


def defined_tasks(folders: Sequence[Path | str]) -> dict[str, str]:
    """name -> "task" or "group" for the YAMLs in ``folders`` (a text scan: ~2 s over lm-eval's 14,000
    YAMLs, where building its TaskManager index takes ~30 s); the first folder naming a task wins."""
    names: dict[str, str] = {}
    for _, defined_as, name in _definitions(folders):
        names.setdefault(name, defined_as)
    return names


def task_yaml(name: str, folders: Sequence[Path | str]) -> Path:
    """The YAML file whose ``task:`` is ``name``, searched in ``folders`` (recursively, in order).

    Raises ValueError listing the folders searched when no file defines the task.
    """
    for path, defined_as, found in _definitions(folders):
        if defined_as == "task" and found == name:
            return path
    searched = ", ".join(str(f) for f in folders)
    raise ValueError(f"no task YAML defines task {name!r}; searched {searched}")


def load_task_yaml(path: Path | str) -> dict:
    """A task YAML with its ``include:`` chain merged (shallow, the including file wins), as lm-eval does."""
    path = Path(path)
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader) or {}
    include = config.pop("include", None)
    if include:
        base = load_task_yaml(path.parent / include)
        config = {**base, **config}
    return config


def included_files(path: Path | str) -> list[Path]:
    """The YAML file and every file its ``include:`` chain pulls in."""
    path = Path(path)
    files = [path]
    include = (yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskLoader) or {}).get("include")
    if include:
        files += included_files(path.parent / include)
    return files


def task_files(name: str, folders: Sequence[Path | str]) -> list[str]:
    """Every file an lm-eval task is made of: its YAML, the files it includes, the Python modules
    beside it (where ``!function`` points), the files of a ``data/`` folder beside it, and the local
    files its ``dataset_kwargs.data_files`` name (relative ones resolved against the working
    directory, as the datasets library does)."""
    path = task_yaml(name, folders)
    folder = path.parent
    files = [*included_files(path), *sorted(folder.glob("*.py"))]
    if (folder / "data").is_dir():
        files += sorted(p for p in (folder / "data").rglob("*") if p.is_file())
    files += [Path(f) for f in local_data_files(load_task_yaml(path)) if Path(f).is_file()]
    return [str(p) for p in dict.fromkeys(files)]


def local_data_files(task_config: dict) -> list[str]:
    """The file names in a task's ``dataset_kwargs.data_files`` (a string, a list, or a split ->
    file(s) mapping), as written; hub and URL names are left out.

    >>> local_data_files({"dataset_kwargs": {"data_files": {"test": "a.jsonl", "train": ["b.csv"]}}})
    ['a.jsonl', 'b.csv']
    """
    spec = (task_config.get("dataset_kwargs") or {}).get("data_files")
    values = spec.values() if isinstance(spec, dict) else [spec]
    names = [name for value in values for name in (value if isinstance(value, list) else [value])]
    return [name for name in names if isinstance(name, str) and "://" not in name]


def reads_own_documents(task_config: dict) -> bool:
    """Whether a task loads its documents itself (``dataset_path``: the hub, json, csv, ...) rather
    than through a ``custom_dataset`` function, which headloc can hand a ``data_file`` and its data
    options (mirror, code execution) as lm-eval metadata."""
    return "custom_dataset" not in task_config


# ------------------------------------------------------------------ what the config check reads

# What lm-eval 0.4.13 renders with Jinja (lm_eval.utils.apply_template): these keys of a task
# (doc_to_image and doc_to_audio may be lists of templates; doc_to_decontamination_query only with
# should_decontaminate) and these keys of its fewshot_config. A string that is a document field's
# name is read as the field instead, and parses as a template anyway (plain text).
JINJA_KEYS = ("description", "doc_to_text", "doc_to_target", "doc_to_choice", "gen_prefix",
              "doc_to_image", "doc_to_audio")
FEWSHOT_JINJA_KEYS = ("doc_to_text", "doc_to_target", "doc_to_choice", "gen_prefix")

# The metrics of a task without metric_list, per output_type (lm-eval's DEFAULT_METRIC_REGISTRY).
DEFAULT_METRICS = {
    "loglikelihood": ["perplexity", "acc"],
    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    "multiple_choice": ["acc", "acc_norm"],
    "generate_until": ["exact_match"],
}


def task_templates(task_config: dict) -> list[tuple[str, str]]:
    """(key, template) for every string of a task that lm-eval renders as a Jinja template.

    >>> task_templates({"doc_to_text": "Q: {{q}}", "doc_to_choice": ["a", "b"], "doc_to_image": ["img"],
    ...                 "fewshot_config": {"doc_to_target": "{{a}}"}})
    [('doc_to_text', 'Q: {{q}}'), ('doc_to_image[0]', 'img'), ('fewshot_config.doc_to_target', '{{a}}')]
    """
    found = []
    keys = [*JINJA_KEYS, *(["doc_to_decontamination_query"] if task_config.get("should_decontaminate") else [])]
    for key in keys:
        value = task_config.get(key)
        if isinstance(value, str):
            found.append((key, value))
        elif key in ("doc_to_image", "doc_to_audio") and isinstance(value, list):
            found += [(f"{key}[{i}]", item) for i, item in enumerate(value) if isinstance(item, str)]
    fewshot = task_config.get("fewshot_config")
    if isinstance(fewshot, dict):
        found += [(f"fewshot_config.{key}", fewshot[key]) for key in FEWSHOT_JINJA_KEYS
                  if isinstance(fewshot.get(key), str)]
    return found


def template_errors(task_config: dict) -> list[tuple[str, str]]:
    """(key, the Jinja parser's message and line) for each template of a task that does not parse.

    >>> template_errors({"doc_to_text": "{{question", "doc_to_target": "{{answer}}"})
    [('doc_to_text', "unexpected end of template, expected 'end of print statement' (line 1)")]
    """
    errors = []
    environment = jinja2.Environment()
    for key, template in task_templates(task_config):
        try:
            environment.parse(template)
        except jinja2.TemplateSyntaxError as error:
            errors.append((key, f"{str(error.message or error).rstrip('.')} (line {error.lineno})"))
    return errors


def defining_file(path: Path | str, key: str) -> Path:
    """The file of a task YAML's ``include:`` chain that sets the top-level ``key`` (the including
    file wins, as in :func:`load_task_yaml`); the YAML itself when none does."""
    for file in included_files(path):
        if key in (yaml.load(file.read_text(encoding="utf-8"), Loader=_TaskLoader) or {}):
            return file
    return Path(path)


@functools.lru_cache(maxsize=1)
def lm_eval_metrics() -> frozenset[str]:
    """The metrics registered in lm-eval (``@register_metric(metric=...)`` in lm_eval/api/metrics.py),
    read as text, without importing lm-eval."""
    source = lm_eval_tasks_dir().parent / "api" / "metrics.py"
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    return frozenset(re.findall(r"register_metric\(\s*metric\s*=\s*['\"]([^'\"]+)['\"]", text))


def reported_filters(task_config: dict) -> list[str] | None:
    """The filter names a task reports each metric under (``metric,filter``): its ``filter_list``
    names, or ``none`` without one; None when only a run can tell (a Python task ``class``).

    >>> reported_filters({}), reported_filters({"filter_list": [{"name": "first-number", "filter": []}]})
    (['none'], ['first-number'])
    """
    if "class" in task_config:
        return None
    filters = task_config.get("filter_list")
    if filters is None:
        return ["none"]
    if isinstance(filters, list) and filters and all(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) for entry in filters):
        return [entry["name"] for entry in filters]
    return None


def reported_metrics(task_config: dict) -> list[str] | None:
    """The metric names a task reports, read from its YAML: its ``metric_list`` names, or lm-eval's
    defaults for its ``output_type`` without one.

    None when only a run can tell: a Python task ``class``; ``process_results`` (the keys of the
    dict it returns); a ``!function`` metric (named after the function); a generation metric
    outside lm-eval's registry or with ``hf_evaluate`` (Hugging Face evaluate's results name their
    own keys).

    >>> reported_metrics({"output_type": "multiple_choice"}), reported_metrics({"process_results": None})
    (['acc', 'acc_norm'], None)
    """
    if "class" in task_config or "process_results" in task_config:
        return None
    output_type = task_config.get("output_type") or "generate_until"
    if output_type not in DEFAULT_METRICS:
        return None
    entries = task_config.get("metric_list")
    if entries is None:
        return list(DEFAULT_METRICS[output_type])
    if not isinstance(entries, list) or not entries or not all(
            isinstance(entry, dict) and isinstance(entry.get("metric"), str) for entry in entries):
        return None
    names = [entry["metric"] for entry in entries]
    if output_type == "generate_until" and (any(entry.get("hf_evaluate") for entry in entries)
                                            or not set(names) <= lm_eval_metrics()):
        return None
    return list(dict.fromkeys(names))


# Filters that pass a generation on whole (or only change its case or spaces): after them a
# generate_until task still compares the generation with its target. Any other (regex, custom, ...)
# extracts or rewrites the answer, so the target need not be a continuation the model would write.
WHOLE_ANSWER_FILTERS = frozenset({"take_first", "lowercase", "uppercase", "remove_whitespace"})
GOLD_DECLARATION = "metadata: {gold_target: true}"


def gold_problem(task_config: dict) -> str | None:
    """Why a task has no gold continuation a gradient method can differentiate (None when it has one),
    read from its YAML (``load_task_yaml``'s merged dict).

    The gold continuation is the task's own target: a ``multiple_choice`` task's gold choice
    (``doc_to_target`` into ``doc_to_choice``), a ``loglikelihood`` task's ``doc_to_target``, a
    ``generate_until`` task's ``doc_to_target`` after the delimiter. The last is a correct answer
    only where the task compares the generation with it: no ``process_results`` (a function that
    decides correctness its own way: a word list, a rhyme, running code) and only filters that keep
    the whole answer (:data:`WHOLE_ANSWER_FILTERS`; a regex extracts part of it). A task whose
    function does accept its target as correct says so in its YAML: ``metadata: {gold_target: true}``.
    ``loglikelihood_rolling`` has no continuation; a Python task ``class`` cannot be read.

    >>> gold_problem({"output_type": "multiple_choice", "doc_to_target": "label", "doc_to_choice": "choices"})
    >>> print(gold_problem({"output_type": "generate_until", "doc_to_target": "", "process_results": None}))
    its doc_to_target is empty; and it decides correctness with process_results (a function), so its target need not be a correct answer
    >>> gold_problem({"output_type": "generate_until", "doc_to_target": "word", "process_results": None,
    ...               "metadata": {"version": 1.0, "gold_target": True}})
    """
    if "class" in task_config:
        return "it is a Python task class, whose targets headloc cannot read from its YAML"
    output_type = task_config.get("output_type") or "generate_until"
    if output_type == "loglikelihood_rolling":
        return "its output_type loglikelihood_rolling scores whole documents: there is no continuation to call gold"
    reasons = []
    target = task_config.get("doc_to_target")
    if "doc_to_target" not in task_config:
        reasons.append("it has no doc_to_target")
    elif isinstance(target, str) and not target.strip():
        reasons.append("its doc_to_target is empty")
    if output_type == "multiple_choice" and task_config.get("doc_to_choice") is None and "doc_to_choice" not in task_config:
        reasons.append("it has no doc_to_choice to take the gold choice from")
    declared = (task_config.get("metadata") or {}).get("gold_target") is True
    if output_type == "generate_until" and not declared:
        if "process_results" in task_config:
            reasons.append("it decides correctness with process_results (a function), so its target need not be "
                           "a correct answer")
        filters = sorted({step.get("function") for entry in task_config.get("filter_list") or []
                          if isinstance(entry, dict) for step in entry.get("filter") or [] if isinstance(step, dict)}
                         - WHOLE_ANSWER_FILTERS, key=str)
        if filters:
            reasons.append(f"its filter_list extracts or rewrites the answer ({', '.join(map(str, filters))}), so its "
                           "target need not be what the model writes")
    return "; and ".join(reasons) or None


def metric_direction(task_config: dict, metric: str) -> bool | None:
    """Whether a higher ``metric`` (a name, or ``name,filter``) is better, as lm-eval decides it: the
    ``higher_is_better`` of the task YAML's ``metric_list`` entry for it, else lm-eval's metric
    registry (``lm_eval.api.registry.is_higher_better``); None when neither declares it.

    A declared direction must be a YAML boolean (``true``/``false``, unquoted): anything else
    (``"false"``, ``no`` quoted, ``0``) raises ValueError naming the value, the task and the metric,
    where ``bool()`` would read the string ``"false"`` as true and rank the opposite heads.

    >>> metric_direction({"metric_list": [{"metric": "margin", "higher_is_better": True}]}, "margin,none")
    True
    >>> metric_direction({"output_type": "loglikelihood_rolling"}, "word_perplexity")
    False
    >>> metric_direction({"task": "t", "metric_list": [{"metric": "m", "higher_is_better": "false"}]}, "m")
    Traceback (most recent call last):
    ValueError: task 't', metric_list entry 'm': higher_is_better 'false' is a str, not a boolean; expected True or False (in a task YAML: true or false, unquoted)
    """
    name = metric.split(",")[0]
    for entry in task_config.get("metric_list") or []:
        if isinstance(entry, dict) and entry.get("metric") == name and entry.get("higher_is_better") is not None:
            return checked_direction(entry["higher_is_better"],
                                     f"task {task_config.get('task')!r}, metric_list entry {name!r}")
    import lm_eval.api.metrics  # noqa: F401  (registers lm-eval's metrics and their directions)
    from lm_eval.api.registry import higher_is_better_registry

    return bool(higher_is_better_registry.get(name)) if name in higher_is_better_registry else None


def checked_direction(value, where: str) -> bool:
    """``value`` if it is a boolean (a YAML ``true``/``false``, Python's True/False); else ValueError
    naming ``where`` (the task and its metric), the value and what is valid.

    >>> checked_direction(False, "x")
    False
    >>> checked_direction(0, "task 't', metric 'acc,none'")
    Traceback (most recent call last):
    ValueError: task 't', metric 'acc,none': higher_is_better 0 is a int, not a boolean; expected True or False (in a task YAML: true or false, unquoted)
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{where}: higher_is_better {value!r} is a {type(value).__name__}, not a boolean; expected "
                     "True or False (in a task YAML: true or false, unquoted)")


def _template_fields(value) -> set[str]:
    if not isinstance(value, str):
        return set()  # a list of literal choices, a number, or a !function
    if _FIELD.match(value):
        return {value}
    if "{{" not in value and "{%" not in value:
        return set()  # a literal string
    optional = set(_DEFINED_TEST.findall(value))  # e.g. mbpp's `is_fewshot is defined`
    names = jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(value))
    return names - optional


def required_fields(task_config: dict) -> list[str]:
    """The document fields a task's templates read (see the module docstring), sorted.

    >>> required_fields({"doc_to_text": "Q: {{question}}", "doc_to_target": "answer",
    ...                  "doc_to_choice": ["no", "yes"]})
    ['answer', 'question']
    """
    fields = set()
    for key in TEMPLATE_KEYS:
        fields |= _template_fields(task_config.get(key))
    return sorted(fields)


def _is_empty(value) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and len(value) == 0)


def check_documents(docs: Iterable[tuple[int, dict]], fields: Sequence[str], source: str, *,
                    task: str) -> None:
    """Raise ValueError on the first document that lacks a field of ``fields`` or has it empty, naming
    ``source`` (the file), the line and the field; and on no documents at all. ``docs`` holds
    (line number, document) pairs, as :func:`headloc.data.datasets.read_jsonl_numbered` returns them.

    >>> check_documents([(1, {"text": "a"}), (3, {"text": ""})], ["text"], "d.jsonl", task="t")
    Traceback (most recent call last):
    ValueError: d.jsonl, line 3: field 'text' is empty (''); task t needs a value there
    """
    count = 0
    for line, doc in docs:
        count += 1
        for field in fields:
            if field not in doc:
                raise ValueError(f"{source}, line {line}: no field {field!r}; task {task} reads fields "
                                 f"{', '.join(fields)} (the document has {', '.join(doc) or 'no fields'})")
            if _is_empty(doc[field]):
                raise ValueError(f"{source}, line {line}: field {field!r} is empty ({doc[field]!r}); task "
                                 f"{task} needs a value there")
    if count == 0:
        raise ValueError(f"{source}: no documents; expected one JSON object per line with fields "
                         f"{', '.join(fields) or '(any)'} for task {task}")
