"""What the workflow knows of its models and tasks, found once when the Snakefile is parsed:
where each model is loaded from, each task's YAML, files and content digest, whether headloc copies
its documents, and what every job is told about it. ``rules/common.smk`` hands these answers to the
rules; the tests ask them directly, without Snakemake.

A task's identity in what decides re-runs is the content of its files (its YAML and its id_task's,
what they include, the Python and data beside them, its local data file, the data mirror's files of
its dataset), each named relative to its task folder, the mirror or the working directory, plus
lm-eval's version: no absolute path, so a results folder moved to another clone stays up to date
and an edited file re-runs its jobs (docs/outputs.md, "Moving or sharing results").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from headloc.data.datasets import DATASETS
from headloc.data.documents import (
    load_task_yaml,
    reads_own_documents,
    task_files,
    task_yaml,
)
from headloc.data.paper_data import mirror_files
from headloc.data.task_scoring import metric_direction
from headloc.model.loading import resolve_source
from headloc.workflow import paths
from headloc.workflow.task_lookup import task_folders
from headloc.workflow.plan import Plan
from headloc.workflow.portable import checkout_relative, files_digest, lm_eval_version, mirror, source_identity


class ModelFacts:
    """Each configured model's source, resolved once, and what its jobs are told."""

    def __init__(self, config: Mapping):
        self.config = config
        self.sources = {name: resolve_source(spec["source"]) for name, spec in config["models"].items()}

    def prepared(self, model: str) -> list[str]:
        """The prepared checkpoint folder, for a model that needs preparation (GGUF); else nothing."""
        return [paths.MODEL_DIR.format(model=model)] if self.sources[model].needs_preparation else []

    def identity(self, model: str) -> str:
        """What a prepared model is made from: an embedded model's package and version, or a GGUF
        file's name and size; never the virtualenv's path."""
        return source_identity(self.config["models"][model]["source"], self.sources[model])

    def location(self, model: str) -> str:
        """What transformers loads: the prepared folder, a local directory (relative to the working
        directory when inside it) or a hub id."""
        source = self.sources[model]
        return paths.MODEL_DIR.format(model=model) if source.needs_preparation else checkout_relative(source.location)

    def options(self, model: str) -> dict:
        """What an evaluating job is told of its model: ``device_map`` only when set, so that the
        jobs of a config without it keep their params (and their results)."""
        spec = self.config["models"][model]
        placement = {"device_map": spec["device_map"]} if spec.get("device_map") else {}
        return {**{key: spec[key] for key in ("dtype", "device", "batch_size", "masks_per_pass")}, **placement}


class TaskFacts:
    """Each configured task's YAML, files, digest and options (see the module)."""

    def __init__(self, config: Mapping, plan: Plan, workdir: str | None = None):
        self.config, self.plan = config, plan
        self.workdir = workdir or os.getcwd()
        self.mirror = mirror(config)  # the same folder the jobs find
        self.task_folders = task_folders(config, registry=True)  # then lm-eval's registry
        self.yamls = {task: load_task_yaml(task_yaml(spec["lm_eval_task"], self.task_folders))
                      for task, spec in config["tasks"].items()}
        self._configs: dict[str, dict] = {}  # lm-eval task -> its YAML, read for a metric's direction
        roots = [*self.task_folders, *([self.mirror] if self.mirror else []), self.workdir]
        self.digests = {task: f"lm_eval=={lm_eval_version()}:{files_digest(self.files(task), roots)}"
                        for task in config["tasks"]}

    def files(self, task: str) -> list[str]:
        """Every file a task's results depend on besides its documents."""
        spec = self.config["tasks"][task]
        mirrored = mirror_files(spec.get("dataset", task), self.mirror)
        names = dict.fromkeys([spec["lm_eval_task"], self.plan.id_scoring(task)[0]])
        found = [path for name in names for path in task_files(name, self.task_folders)]
        return [*dict.fromkeys(found), *map(str, mirrored)]

    def copies_documents(self, task: str) -> bool:
        """Whether headloc copies the task's documents into results/data (a dataset built into
        headloc, or the task's data_file, handed to its custom_dataset loader); otherwise the task
        reads its own documents (dataset_path: the hub, json, csv, ...) and headloc records which
        ones it scores."""
        spec = self.config["tasks"][task]
        builtin = spec.get("data_file") or spec.get("dataset", task) in DATASETS
        return bool(builtin) and not reads_own_documents(self.yamls[task])

    def full_documents(self, task: str) -> str:
        """The task's full-data documents: a JSONL copy, or the record of its own documents' indices."""
        return (paths.DOCUMENTS if self.copies_documents(task) else paths.DOCUMENT_INDICES).format(task=task)

    def id_subset(self, task: str) -> str:
        return paths.ID_SUBSET.format(task=task, n=self.plan.id_docs(task), seed=self.plan.seed,
                                      ext="jsonl" if self.copies_documents(task) else "json")

    def data_file_digest(self, task: str) -> str | None:
        """A task's own JSONL file, by its content: an edited file re-runs what depends on it, a moved
        or freshly cloned one does not. The job reads the file named by the config."""
        data_file = self.config["tasks"][task].get("data_file")
        return files_digest([data_file], [self.workdir]) if data_file else None

    def dataset_options(self, task: str) -> dict:
        spec = self.config["tasks"][task]
        return {"dataset": spec.get("dataset", task), "n_docs": spec["n_docs"], "seed": self.plan.seed,
                "mirror": bool(self.mirror), "lm_eval_task": spec["lm_eval_task"]}

    def options(self, task: str) -> dict:
        """Everything an evaluation job needs to build the lm-eval task (its documents added by the job).

        headloc's data options (mirror, code execution, the task's dataset_kwargs) go only to tasks
        with a custom_dataset loader, as lm-eval metadata; a dataset_path task gets none of them.
        """
        spec = self.config["tasks"][task]
        data = {"mirror": bool(self.mirror), "allow_code_execution": self.config["data"]["allow_code_execution"]}
        loader = {} if reads_own_documents(self.yamls[task]) else {**data, **spec["dataset_kwargs"]}
        return {"lm_eval_task": spec["lm_eval_task"], "metric": spec["metric"], "chat": spec["chat"],
                "dataset_kwargs": loader}

    def scoring_higher_is_better(self, task: str) -> bool:
        """Whether the metric the searches score (id_task and id_metric when set, else the task's own)
        is higher-is-better, as the task's YAML or lm-eval's registry declares (the config check
        refused a metric that declares neither)."""
        return self._direction(*self.plan.id_scoring(task))

    def directions(self) -> dict[str, bool]:
        """Task -> whether its metric (``tasks.<name>.metric`` of its lm_eval_task: what validation
        scores and the tables show) is higher-is-better; the report orients every delta by it."""
        return {task: self._direction(spec["lm_eval_task"], spec["metric"])
                for task, spec in self.config["tasks"].items()}

    def _direction(self, lm_eval_task: str, metric: str) -> bool:
        if lm_eval_task not in self._configs:
            self._configs[lm_eval_task] = load_task_yaml(task_yaml(lm_eval_task, self.task_folders))
        found = metric_direction(self._configs[lm_eval_task], metric)
        if found is None:
            raise ValueError(f"metric {metric!r} of task {lm_eval_task} declares no direction")
        return found

    def scoring_options(self, task: str) -> dict:
        """How the searches score masks on the identification subset: tasks.<name>.id_task and
        id_metric when set (a continuous score), else the task itself."""
        lm_eval_task, metric = self.plan.id_scoring(task)
        return {**self.options(task), "lm_eval_task": lm_eval_task, "metric": metric}
