"""What :func:`headloc.locate` scores: an lm-eval task (a name or a YAML file, headloc's task
folders and yours) or a callable, turned into ``score(masks) -> one score per mask``.

An lm-eval task is scored by headloc's engine (:class:`headloc.engine.evaluation.MaskEvaluator`:
one task build, masks sharing forward passes), the engine of the workflow's scoring jobs. A
callable ``task(model) -> float`` is called once per mask with the mask's heads ablated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headloc.data import TASKS_DIR
from headloc.data.documents import load_task_yaml, lm_eval_tasks_dir, task_yaml
from headloc.data.task_scoring import checked_direction, metric_direction, reported_filters, reported_metrics


@dataclass
class Task:
    """A task as locate uses it: ``spec`` and ``task_folders`` for an lm-eval task, ``fn`` for a callable."""

    name: str
    spec: object = None  # headloc.engine.lm_eval_tasks.TaskSpec (torch-free import deferred)
    fn: Callable | None = None
    task_folders: list = field(default_factory=list)  # headloc's tasks, then include_path's folders
    higher_is_better: bool = True  # the metric's direction: the searches rank heads by it

    @property
    def callable(self) -> bool:
        return self.fn is not None


def resolve_task(task, *, metric=None, chat=False, documents=None, include_path=(), dataset_kwargs=None,
                 higher_is_better: bool | None = None) -> Task:
    """``task`` (lm-eval task name, path of a task YAML, or a callable) as a :class:`Task`.

    ``documents`` picks what the search scores: None (the task's own documents), an int N (its
    first N), a sequence of document indices, or a file as the workflow writes it (a ``.jsonl`` of
    documents, a ``.json`` record ``{"doc_ids": [...]}``).

    ``higher_is_better``: the metric's direction. An lm-eval task's is read (its YAML's
    ``metric_list``, else lm-eval's metric registry), as in the workflow; give it only for a metric
    that declares none. A callable's score is higher-is-better unless you say False (a loss).
    """
    if callable(task):
        if documents is not None or metric is not None:
            raise ValueError("documents= and metric= apply to an lm-eval task; a callable task scores "
                             "its own documents and returns one number")
        name = getattr(task, "__name__", "task").strip("<>") or "task"
        given = None if higher_is_better is None else checked_direction(higher_is_better, f"callable task {name!r}")
        return Task(name=name, fn=task, higher_is_better=True if given is None else given)
    if not isinstance(task, (str, Path)):
        raise TypeError(f"task must be an lm-eval task name, a task YAML path or a callable "
                        f"model -> score, got {type(task).__name__}")
    folders = [TASKS_DIR, *_folders(include_path)]
    name = str(task)
    if name.endswith((".yaml", ".yml")):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ValueError(f"task YAML {name!r} does not exist; expected an lm-eval task name or a task YAML file")
        name = load_task_yaml(path).get("task")
        if not isinstance(name, str):
            raise ValueError(f"{path} has no 'task:' name; an lm-eval task YAML names its task")
        folders.insert(1, path.resolve().parent)
    from headloc.engine.lm_eval_tasks import TaskSpec

    spec = TaskSpec(name, metric or default_metric(name, folders), chat, dict(dataset_kwargs or {}))
    direction = declared_direction(name, spec.metric_key, folders, higher_is_better)
    return Task(name=name, spec=choose_documents(spec, documents), task_folders=folders, higher_is_better=direction)


def declared_direction(name: str, metric: str, folders: Sequence[Path], given: bool | None) -> bool:
    """Whether a higher ``metric`` of task ``name`` is better, as the task or lm-eval declares it;
    ``given`` only where neither does, and never against a declaration. A direction, declared or
    given, is a boolean: anything else raises ValueError naming it."""
    path = task_yaml(name, [*folders, lm_eval_tasks_dir()])
    if given is not None:
        given = checked_direction(given, f"the higher_is_better argument for task {name!r}")
    try:
        declared = metric_direction(load_task_yaml(path), metric)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    if declared is None and given is None:
        raise ValueError(f"task {name!r}: neither its YAML's metric_list nor lm-eval's registry says whether a "
                         f"higher {metric.split(',')[0]!r} is better; pass higher_is_better=True or False "
                         "(--lower-is-better), or declare it in the task's metric_list")
    if declared is not None and given is not None and given != declared:
        raise ValueError(f"task {name!r} declares higher_is_better={declared} for {metric.split(',')[0]!r}; "
                         f"higher_is_better={given} contradicts it")
    return declared if declared is not None else given


def _folders(include_path) -> list[Path]:
    paths = [include_path] if isinstance(include_path, (str, Path)) else list(include_path or ())
    for folder in paths:
        if not Path(folder).expanduser().is_dir():
            raise ValueError(f"include_path {str(folder)!r} is not a directory; expected a folder of lm-eval task YAMLs")
    return [Path(folder).expanduser().resolve() for folder in paths]


def default_metric(name: str, folders: Sequence[Path]) -> str:
    """The first metric (and filter) the task's YAML reports, as lm-eval names it (``acc,none``);
    for a ``process_results`` task, the first of its ``metric_list`` (the keys it aggregates)."""
    config = load_task_yaml(task_yaml(name, [*folders, lm_eval_tasks_dir()]))
    metrics, filters = reported_metrics(config), reported_filters(config)
    listed = [entry.get("metric") for entry in config.get("metric_list") or [] if isinstance(entry, dict)]
    if not metrics and "process_results" in config and listed and isinstance(listed[0], str):
        metrics = listed
    if not metrics or not filters:
        raise ValueError(f"task {name!r} does not say in its YAML which metric it reports (a Python "
                         "class, or process_results without metric_list); pass metric= (--metric), "
                         "e.g. metric='acc'")
    return f"{metrics[0]},{filters[0]}"


def choose_documents(spec, documents):
    """``spec`` restricted to ``documents`` (see :func:`resolve_task`)."""
    from dataclasses import replace

    if documents is None:
        return spec
    if isinstance(documents, (str, Path)):
        if not Path(documents).is_file():
            raise ValueError(f"documents file {str(documents)!r} does not exist; expected a .jsonl of "
                             "documents or a .json record {\"doc_ids\": [...]}")
        return spec.with_documents(documents)
    if isinstance(documents, (int, np.integer)) and not isinstance(documents, bool):
        if documents < 1:
            raise ValueError(f"documents={documents}: expected a positive number of documents")
        return replace(spec, doc_ids=tuple(range(int(documents))))
    ids = tuple(documents)
    if not ids or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i >= 0 for i in ids):
        raise ValueError(f"documents={documents!r}: expected None, a number, a file or non-negative document indices")
    return replace(spec, doc_ids=tuple(int(i) for i in ids))


def count_documents(task: Task) -> int | None:
    """How many documents a search of ``task`` scores (None for a callable: only it knows)."""
    if task.callable:
        return None
    spec = task.spec
    if spec.doc_ids is not None:
        return len(spec.doc_ids)
    data_file = spec.dataset_kwargs.get("data_file")
    if data_file:
        return sum(1 for line in Path(data_file).read_text(encoding="utf-8").splitlines() if line.strip())
    from headloc.engine.lm_eval_tasks import count_documents as counted

    return counted(spec, task.task_folders)


def mask_scorer(task: Task, model, tokenizer, *, batch_size: int, masks_per_pass: int, progress: bool, bar=None,
                per_doc: bool = False):
    """``score(masks, desc) -> list of scores``: headloc's engine for an lm-eval task, else the callable.
    ``bar``: one tqdm bar that every call advances (a search's), instead of a bar per call. ``per_doc``:
    a :class:`headloc.io.Scored` instead, with each mask's per-document scores where the
    task's metric is a mean over documents (a callable that returns one number: none)."""
    if task.callable:
        return _callable_scorer(task.fn, model, progress, bar, per_doc)
    from headloc.engine.evaluation import MaskEvaluator, scored

    evaluator = MaskEvaluator(model, tokenizer, task.spec, batch_size=batch_size, masks_per_pass=masks_per_pass,
                              include_path=task.task_folders)

    def score(masks, desc="masks"):
        results = evaluator.evaluate_masks(masks, progress=progress, desc=desc, bar=bar)
        return scored(results) if per_doc else [result.score for result in results]

    return score


def _callable_scorer(fn, model, progress: bool, bar=None, per_doc: bool = False):
    from tqdm.auto import tqdm

    from headloc.heads import HeadGeometry
    from headloc.io import Scored, per_doc_matrix
    from headloc.model.ablation import ablate_heads, masks_to_gate

    geometry = HeadGeometry.of(model.config)

    def one(mask) -> np.ndarray:
        if not np.asarray(mask).any():  # as the engine: an empty mask runs the model untouched
            return per_document(fn(model))
        with ablate_heads(model, masks_to_gate(np.asarray(mask), geometry)):
            return per_document(fn(model))

    def score(masks, desc="masks"):
        masks = np.atleast_2d(masks)
        rows = []
        for mask in (masks if bar is not None else tqdm(masks, desc=desc, disable=not progress)):
            rows.append(one(mask))
            if bar is not None:
                bar.update(1)
        found = Scored(np.array([row.mean() for row in rows]), per_doc_matrix(
            [row if len(row) > 1 else None for row in rows]))
        return found if per_doc else list(found.scores)

    return score


def per_document(value) -> np.ndarray:
    """A callable task's answer as per-document scores: one number (a score it computed itself), or
    one per document (the score is their mean, and each head's evidence resamples them)."""
    found = np.asarray(value, dtype=float).reshape(-1)
    if found.size == 0 or not np.all(np.isfinite(found)):
        raise ValueError(f"a callable task must return a finite number or one per document, got {value!r}")
    return found
