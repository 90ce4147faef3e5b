"""Scoring a model with heads ablated, through lm-evaluation-harness.

:class:`AblatedLM` is lm-eval's ``HFLM`` with a head gate installed around every forward pass (the
``_model_call`` / ``_model_generate`` seam lm-eval's own ``SteeredModel`` uses). :class:`MaskEvaluator`
loads one model and builds one lm-eval task once, then scores any number of masks against it.

``MaskEvaluator.evaluate_masks`` receives all the masks of a job at once, so an implementation
that lets several masks share one forward pass (a gate of shape [batch, layers, heads]) can
group them without changing its callers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from lm_eval.api.registry import register_model
from lm_eval.evaluator import evaluate
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from lm_eval.tasks._yaml_loader import load_yaml
from tqdm.auto import tqdm

from headloc.ablation import HeadGeometry, ablate_heads, masks_to_gate
from headloc.models import load_model

TASKS_DIR = Path(__file__).parent / "tasks"


@dataclass(frozen=True)
class TaskSpec:
    """One lm-eval task as the workflow uses it.

    Attributes
    ----------
    lm_eval_task : registered task name, e.g. ``headloc_ioi``.
    metric : metric name, optionally with its filter (``acc`` means ``acc,none``).
    chat : apply the tokenizer's chat template to prompts.
    dataset_kwargs : overrides passed to the task's data loader (e.g. ``data_file``).
    """

    lm_eval_task: str
    metric: str = "acc"
    chat: bool = False
    dataset_kwargs: dict = field(default_factory=dict)

    @property
    def metric_key(self) -> str:
        return self.metric if "," in self.metric else f"{self.metric},none"

    def with_data_file(self, path) -> "TaskSpec":
        """The same task reading its documents from the JSONL file ``path``."""
        return replace(self, dataset_kwargs={**self.dataset_kwargs, "data_file": str(path)})


@dataclass
class MaskResult:
    """The score of one mask and the per-document records behind it."""

    score: float
    samples: list[dict]


@register_model("headloc")
class AblatedLM(HFLM):
    """``HFLM`` whose forward passes run with ``self.gate`` applied (None = no ablation)."""

    gate = None

    def _ablation(self):
        if self.gate is None:
            return contextlib.nullcontext()
        return ablate_heads(self.model, self.gate)

    def _model_call(self, inps, attn_mask=None, labels=None):
        with self._ablation():
            return super()._model_call(inps, attn_mask=attn_mask, labels=labels)

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        with self._ablation():
            return super()._model_generate(context, max_length, stop, **generation_kwargs)


def task_config(manager: TaskManager, task: TaskSpec) -> dict:
    """The registered task's YAML config with ``task.dataset_kwargs`` merged into its own.

    lm-eval 0.4.13 treats a dict passed to ``TaskManager.load`` as a complete inline task, not as
    overrides of a registered one, so the registered YAML is loaded (includes resolved) here.
    """
    entry = manager.task_index.get(task.lm_eval_task)
    if entry is None or entry.yaml_path is None:
        known = ", ".join(manager.all_subtasks) or "none"
        raise ValueError(f"unknown lm-eval task {task.lm_eval_task!r}; the include path has: {known}")
    config = load_yaml(entry.yaml_path, resolve_func=True)
    config["dataset_kwargs"] = {**(config.get("dataset_kwargs") or {}), **task.dataset_kwargs}
    return config


def require_chat_template(tokenizer, task: TaskSpec) -> None:
    if task.chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"task {task.lm_eval_task} is a chat task but the tokenizer "
            f"{getattr(tokenizer, 'name_or_path', '')!r} has no chat template"
        )


class MaskEvaluator:
    """Score masks of one model on one task; the model and task are built once.

    Parameters
    ----------
    model, tokenizer : a loaded transformers causal LM and its tokenizer.
    task : the task and metric to score.
    batch_size : documents per forward pass.
    include_path : folder(s) of task YAMLs (headloc's own tasks by default).
    """

    def __init__(self, model, tokenizer, task: TaskSpec, *, batch_size: int = 16,
                 include_path=TASKS_DIR):
        require_chat_template(tokenizer, task)
        self.task = task
        self.geometry = HeadGeometry.of(model.config)
        self.lm = AblatedLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size,
                            device=str(model.device))
        paths = include_path if isinstance(include_path, (list, tuple)) else [include_path]
        manager = TaskManager(include_path=[str(p) for p in paths], include_defaults=False)
        self.task_dict = manager.load([task_config(manager, task)])

    def evaluate(self, gate=None) -> MaskResult:
        """Score the task with ``gate`` ([layers, heads], 1 keeps a head) or unablated."""
        self.lm.gate = gate
        try:
            output = evaluate(
                lm=self.lm, task_dict=self.task_dict, bootstrap_iters=0, log_samples=True,
                apply_chat_template=self.task.chat, verbosity="WARNING",
            )
        finally:
            self.lm.gate = None
        name = self.task.lm_eval_task
        metrics = output["results"][name]
        if self.task.metric_key not in metrics:
            known = sorted(k for k in metrics if "," in k and not k.endswith("_stderr,none"))
            raise ValueError(
                f"task {name} reports no metric {self.task.metric_key!r}; it reports {known}"
            )
        samples = [_compact_sample(s, self.task.metric) for s in output["samples"][name]]
        return MaskResult(float(metrics[self.task.metric_key]), samples)

    def evaluate_mask(self, mask) -> MaskResult:
        """Score one mask (1 = ablated), a vector over all heads."""
        mask = np.asarray(mask)
        gate = masks_to_gate(mask, self.geometry) if mask.any() else None
        return self.evaluate(gate)

    def evaluate_masks(self, masks, *, progress: bool = True, desc: str = "masks") -> list[MaskResult]:
        """Score each row of ``masks`` (M x N, 1 = ablated), with a progress bar."""
        masks = np.atleast_2d(masks)
        return [self.evaluate_mask(m) for m in tqdm(masks, desc=desc, disable=not progress)]


def _compact_sample(sample: dict, metric: str) -> dict:
    """The parts of an lm-eval sample record worth keeping for inspection."""
    response = sample.get("filtered_resps", sample.get("resps"))
    while isinstance(response, list) and len(response) == 1:
        response = response[0]
    name = metric.split(",")[0]
    return {"doc_id": sample["doc_id"], "target": sample.get("target"), "response": response,
            name: sample.get(name)}


def load_evaluator(location: str, task: TaskSpec, *, dtype="float32", device="cpu",
                   batch_size=16, include_path=TASKS_DIR) -> MaskEvaluator:
    """Load the model at ``location`` once and build an evaluator for ``task``."""
    model, tokenizer = load_model(location, dtype=dtype, device=device)
    return MaskEvaluator(model, tokenizer, task, batch_size=batch_size, include_path=include_path)
