"""Task files and the documents they read: where a task is defined, and which fields its documents need.

lm-eval reads a document field in three ways in a task YAML's ``doc_to_text``, ``doc_to_target``
and ``doc_to_choice``: a bare field name (``doc_to_text: text``), a Jinja template
(``"Question: {{question}}"``), or a ``!function`` (opaque here). :func:`required_fields` collects
the fields of the first two kinds, so :func:`check_documents` can reject a document that lacks one
before any evaluation, naming the file, the line and the field; a ``!function`` or a literal
contributes nothing. Task files are also what an evaluation depends on: :func:`task_files` lists
the YAML that defines a task, what it includes, and the Python and data beside it, so the workflow
re-runs an evaluation when any of them changes.

The config check (:func:`headloc.workflow.config.check_config`) also reads :func:`template_errors`
before any job: the Jinja templates of a task lm-eval would fail to parse. What a task's YAML says of
its scoring (the metrics it reports, their direction, its gold target) is
:mod:`headloc.data.task_scoring`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import jinja2
import jinja2.meta
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
