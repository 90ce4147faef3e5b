"""lm-eval tasks as headloc runs them: which task, metric and documents (:class:`TaskSpec`), its
task dict built from headloc's task folders or lm-eval's registry (:func:`load_task`), and lm-eval
kept quiet while a search draws its own progress bar (:func:`lm_eval_quiet`)."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
from dataclasses import dataclass, field, replace

from lm_eval.tasks import TaskManager
from tqdm.auto import tqdm

from headloc.data import TASKS_DIR

FEWSHOT_SEED = 1234  # lm-eval's simple_evaluate default: the seed of a task's few-shot sampler
# lm-eval's modules whose progress bars a headloc evaluation opens: building a task's requests,
# tokenizing them, running them through the model
LM_EVAL_BARS = ("lm_eval.api.task", "lm_eval.api.model", "lm_eval.models.huggingface")


@dataclass(frozen=True)
class TaskSpec:
    """One lm-eval task as the workflow uses it.

    Attributes
    ----------
    lm_eval_task : registered task name, e.g. ``headloc_ioi``.
    metric : metric name, optionally with its filter (``acc`` means ``acc,none``).
    chat : apply the tokenizer's chat template to prompts.
    dataset_kwargs : arguments of the task's data loader (e.g. ``data_file``), see :func:`load_task`.
    doc_ids : indices of the task's own evaluation documents to score (lm-eval's ``samples``);
        None scores them all. For tasks that load their documents themselves (``dataset_path``),
        where headloc selects documents instead of copying them.
    """

    lm_eval_task: str
    metric: str = "acc"
    chat: bool = False
    dataset_kwargs: dict = field(default_factory=dict)
    doc_ids: tuple[int, ...] | None = None

    @property
    def metric_key(self) -> str:
        return self.metric if "," in self.metric else f"{self.metric},none"

    def with_data_file(self, path) -> "TaskSpec":
        """The same task reading its documents from the JSONL file ``path``."""
        return replace(self, dataset_kwargs={**self.dataset_kwargs, "data_file": str(path)})

    def with_documents(self, path) -> "TaskSpec":
        """The same task on the documents the workflow chose: a JSONL file of documents (``.jsonl``,
        handed to the task's loader) or a JSON record of document indices (``{"doc_ids": [...]}``)."""
        if str(path).endswith(".jsonl"):
            return self.with_data_file(path)
        with open(path, encoding="utf-8") as handle:
            return replace(self, doc_ids=tuple(int(i) for i in json.load(handle)["doc_ids"]))


def load_task(task: TaskSpec, include_path=TASKS_DIR) -> dict:
    """lm-eval's task dict (``TaskManager.load``) for ``task``, indexed from ``include_path``.

    ``task.dataset_kwargs`` reach the task's ``custom_dataset`` as the TaskManager's ``metadata``,
    lm-eval's public way to pass a task arguments (the CLI's ``--metadata``): lm-eval calls
    ``custom_dataset(**metadata, **dataset_kwargs)``. (So a key that a task YAML's own
    ``dataset_kwargs`` also sets is refused as a duplicate argument; headloc's YAMLs set none.)
    """
    paths = include_path if isinstance(include_path, (list, tuple)) else [include_path]
    folders = [str(p) for p in paths]
    manager = TaskManager(include_path=folders, include_defaults=False, metadata=dict(task.dataset_kwargs))
    if task.lm_eval_task not in manager.all_subtasks:  # lm-eval's own registry (indexing it takes ~30 s)
        manager = TaskManager(include_path=folders, metadata=dict(task.dataset_kwargs))
    if task.lm_eval_task not in manager.all_subtasks:
        known = ", ".join(sorted(manager.all_subtasks)[:40])
        raise ValueError(f"unknown lm-eval task {task.lm_eval_task!r}: not in {', '.join(folders)} nor in "
                         f"lm-eval's registry; the include path has: {known}, ...")
    return manager.load([task.lm_eval_task])


def count_documents(task: TaskSpec, include_path=TASKS_DIR) -> int:
    """How many evaluation documents the task has (its test split, or the split lm-eval evaluates)."""
    task_dict = load_task(task, include_path)
    (loaded,) = task_dict["tasks"].values() if "tasks" in task_dict else task_dict.values()
    return len(loaded.eval_docs)


class _SilentBar(tqdm):
    """A tqdm bar that never shows (tqdm's own ``disable``), whatever its caller asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "disable": True})


@contextlib.contextmanager
def lm_eval_quiet():
    """lm-eval prints nothing while open: its loggers (``lm_eval.*``: a warning at each task build
    and at wrapping a loaded model) below ERROR, and its progress bars off. The bars take no switch
    that ``evaluate()`` passes on (building a task's requests has none at all), so the ``tqdm``
    that each module of :data:`LM_EVAL_BARS` calls is a silent one while open; the bars of the
    ``datasets`` library, which loads a task's documents, have a switch of their own."""
    from datasets.utils import logging as datasets_logging

    logger = logging.getLogger("lm_eval")
    level, datasets_bars = logger.level, datasets_logging.is_progress_bar_enabled()
    modules = [importlib.import_module(name) for name in LM_EVAL_BARS]
    patched = [(module, module.tqdm) for module in modules if hasattr(module, "tqdm")]
    logger.setLevel(logging.ERROR)
    datasets_logging.disable_progress_bar()
    try:
        for module, _ in patched:
            module.tqdm = _SilentBar
        yield
    finally:
        for module, bar in patched:
            module.tqdm = bar
        logger.setLevel(level)
        if datasets_bars:
            datasets_logging.enable_progress_bar()


def require_chat_template(tokenizer, task: TaskSpec) -> None:
    if task.chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"task {task.lm_eval_task} is a chat task but the tokenizer "
            f"{getattr(tokenizer, 'name_or_path', '')!r} has no chat template"
        )
