"""The lm-eval tasks a workflow config names, found and read: the task folders headloc hands lm-eval
(its own tasks, then the config's ``include_path``), the tasks they define, and each named task's
YAML, found once (the folders first, then lm-eval's registry) for the config checks
(:mod:`headloc.workflow.config`) and the jobs alike."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from headloc.data import TASKS_DIR
from headloc.data.documents import defined_tasks, lm_eval_tasks_dir, load_task_yaml, task_yaml


def task_folders(config: dict, *, registry: bool = False) -> list[Path]:
    """The task folders: the folders of task YAMLs headloc hands lm-eval, its own tasks, then the
    config's ``include_path`` (absolute, found in this checkout); with ``registry``, lm-eval's
    registry after them (where a task's YAML is looked up)."""
    own = [TASKS_DIR, *(Path(folder).expanduser().resolve() for folder in config.get("include_path") or [])]
    return [*own, lm_eval_tasks_dir()] if registry else own


def lm_eval_tasks(folders=(TASKS_DIR,)) -> list[str]:
    """Names of the lm-eval tasks (not groups) defined in ``folders``."""
    return sorted(name for name, defined_as in defined_tasks(folders).items() if defined_as == "task")


class TaskYaml(NamedTuple):
    """An lm-eval task the config names, read: its name, its YAML file and that YAML (includes merged)."""

    task: str
    path: Path
    yaml: dict


class TaskLookup:
    """Where the config's lm-eval tasks are defined (its task folders, then lm-eval's registry) and
    their YAMLs, each found and read once; shared by the normalisation and the checks."""

    def __init__(self, config: dict):
        self.task_folders, self.with_registry = task_folders(config), task_folders(config, registry=True)
        self._local = defined_tasks(self.task_folders)
        self._registry: dict[str, str] | None = None  # lm-eval's 14,000 YAMLs: scanned only when needed
        self._read: dict[str, TaskYaml] = {}

    def defined_as(self, task: str) -> str | None:
        """"task", "group" or None (defined nowhere): the task folders first, then lm-eval's registry."""
        if self._registry is None and task not in self._local:
            self._registry = defined_tasks([lm_eval_tasks_dir()])
        return self._local.get(task) or (self._registry or {}).get(task)

    def read(self, task: str) -> TaskYaml:
        """The task's YAML (a task :meth:`defined_as` "task")."""
        if task not in self._read:
            path = task_yaml(task, self.with_registry)
            self._read[task] = TaskYaml(task, path, load_task_yaml(path))
        return self._read[task]

    def scorer(self, spec: dict, read: TaskYaml) -> TaskYaml | None:
        """What scores a config task's identification subset: its ``id_task`` when set, else the task
        itself (``read``); None for an id_task that is no task (:func:`check_scoring` says so)."""
        id_task = spec.get("id_task")
        if not id_task or id_task == read.task:
            return read
        return self.read(id_task) if self.defined_as(id_task) == "task" else None
