"""Scoring a model with heads ablated, through lm-evaluation-harness.

:class:`AblatedLM` is the seam: lm-eval's ``HFLM`` with a head gate installed around
``_model_call`` and ``_model_generate`` only, the pattern of lm-eval's own ``SteeredModel``
(``lm_eval/models/hf_steered.py``). It is registered with lm-eval as ``headloc``, so lm-eval's
own entry points run it once this module is imported, a task's documents given as metadata::

    simple_evaluate(model="headloc", model_args="pretrained=DIR,heads=L0H1+L1H2", tasks=["headloc_ioi"],
                    task_manager=TaskManager(include_path=TASKS_DIR, metadata={"data_file": "docs.jsonl"}))
    python -c "import headloc.engine.evaluation; from lm_eval.__main__ import cli_evaluate; cli_evaluate()" \
        run --model headloc --model_args pretrained=DIR,heads=L0H1+L1H2 --include_path src/headloc/tasks \
        --tasks headloc_ioi --metadata '{"data_file": "docs.jsonl"}'

:class:`MaskEvaluator` loads one model and builds one lm-eval task once, then scores any number of
masks against it, one lm-eval ``evaluate()`` per mask. With ``masks_per_pass > 1`` it hands the
masks to the grouped engine (:mod:`headloc.engine.grouped`), which lets a group of masks share forward
passes and gives the same results; where the installed lm-eval or transformers differ from the
versions that engine was checked with, it warns and scores one mask at a time instead.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import numpy as np
from lm_eval.evaluator import evaluate
from tqdm.auto import tqdm

from headloc.engine.backoff import RowBudget
from headloc.engine.lm import AblatedLM
from headloc.engine.lm_eval_tasks import FEWSHOT_SEED, TaskSpec, load_task, require_chat_template
from headloc.engine.shared_layers import shared_order
from headloc.heads import BATCH_SIZE
from headloc.model.ablation import HeadGeometry, masks_to_gate
from headloc.model.loading import load_model
from headloc.model.memory import resolve_rows
from headloc.data import TASKS_DIR



@dataclass
class MaskResult:
    """The score of one mask and the per-document records behind it."""

    score: float
    samples: list[dict]
    metric: str = ""

    @property
    def per_doc(self) -> np.ndarray | None:
        """The metric's value on each document, in document order, where the score is their mean (an
        accuracy, a margin); None where it is not (an aggregate such as a perplexity, whose samples
        hold pairs): the evidence of a search resamples these (:mod:`headloc.search.evidence`)."""
        name = self.metric.split(",")[0]
        values = [s.get(name) for s in sorted(self.samples, key=lambda s: s["doc_id"])]
        if not values or not all(isinstance(v, (int, float, np.number, np.bool_)) for v in values):
            return None
        values = np.asarray(values, dtype=float)
        if not np.all(np.isfinite(values)) or not np.isclose(values.mean(), self.score, rtol=1e-6, atol=1e-9):
            return None
        return values


def scored(results) -> "Scored":
    """The scores of ``results`` (:class:`MaskResult`) with their per-document scores, where every one
    has them, as the search steps take them (:class:`headloc.io.Scored`)."""
    from headloc.io import Scored, per_doc_matrix

    return Scored(np.array([r.score for r in results], dtype=float),
                  per_doc_matrix([r.per_doc for r in results]))


def check_grouping(batch_size, masks_per_pass, device: str = "cpu") -> None:
    """Raise ValueError unless ``batch_size`` rows (``"auto"``: what it starts at on ``device``) can
    hold a group of ``masks_per_pass`` masks."""
    if batch_size == "auto":
        batch_size = resolve_rows(batch_size, device)
    if isinstance(masks_per_pass, bool) or not isinstance(masks_per_pass, (int, np.integer)) \
            or masks_per_pass < 1:
        raise ValueError(f"masks_per_pass must be a positive integer, got {masks_per_pass!r}")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < masks_per_pass:
        raise ValueError(
            f"batch_size {batch_size!r} cannot hold one group of masks_per_pass={masks_per_pass} "
            f"masks: it counts rows per forward pass and must be an integer >= {masks_per_pass}"
        )


class MaskEvaluator:
    """Score masks of one model on one task; the model and task are built once.

    Parameters
    ----------
    model, tokenizer : a loaded transformers causal LM and its tokenizer.
    task : the task and metric to score.
    batch_size : rows per forward pass. With one mask per pass a row is a document; with
        ``masks_per_pass = M`` a row is a (document, mask) pair, so a pass holds
        ``batch_size // M`` documents times M masks. ``"auto"``: start large on an accelerator
        (:data:`headloc.engine.backoff.AUTO_ROWS`), 16 on a CPU. Either way a pass that runs out of
        accelerator memory is retried with half the rows (:class:`~headloc.engine.backoff.RowBudget`),
        then fewer masks per pass if the rows no longer hold a group, and the working size is kept.
    masks_per_pass : masks that share each forward pass in :meth:`evaluate_masks` (1 = one mask
        after another, through lm-eval's own batching; more: :mod:`headloc.engine.grouped`, which falls
        back to 1 with a warning where the installed lm-eval or transformers are not the versions
        it was checked with).
    include_path : folder(s) of task YAMLs (headloc's own tasks by default).
    log : where the out-of-memory back-off says what it did (the ``headloc`` logger by default).

    Memory is bounded by ``batch_size``: a forward pass never holds more than ``batch_size`` rows,
    whatever ``masks_per_pass`` is (activations and logits grow with rows x sequence length, and
    only the scored positions' logits are computed in a mask group). Between passes a group keeps
    one small answer (a log-likelihood or a generated string) per request and mask.
    """

    def __init__(self, model, tokenizer, task: TaskSpec, *, batch_size: int | str = 16,
                 masks_per_pass: int = 1, include_path=TASKS_DIR, log=None):
        rows = resolve_rows(batch_size, str(model.device))
        check_grouping(rows, masks_per_pass)
        require_chat_template(tokenizer, task)
        self.task = task
        self.masks_per_pass = int(masks_per_pass)
        self.geometry = HeadGeometry.of(model.config)
        lm_class = AblatedLM
        if self.masks_per_pass > 1:
            from headloc.engine import grouped  # torch internals and version checks: only for groups

            problem = grouped.version_problem()
            if problem is None:
                lm_class = grouped.GroupedLM
            else:
                warnings.warn(f"{problem}; scoring one mask at a time instead of "
                              f"masks_per_pass={self.masks_per_pass}", stacklevel=2)
                self.masks_per_pass = 1
        self.lm = lm_class(pretrained=model, tokenizer=tokenizer, batch_size=rows, device=str(model.device))
        self.budget = RowBudget(rows, log=log)
        self.task_dict = load_task(task, include_path)

    @property
    def model(self):
        """The model it scores (a job that also differentiates it shares the one load)."""
        return self.lm.model

    @property
    def tokenizer(self):
        return self.lm.tokenizer

    def _at(self, rows: int):
        """The LM set to ``rows`` rows per forward pass (HFLM's attribute behind its batch_size)."""
        self.lm.batch_size_per_gpu = rows
        return self.lm

    def evaluate(self, gate=None) -> MaskResult:
        """Score the task with ``gate`` ([layers, heads], 1 keeps a head) or unablated."""
        self.lm.gate = gate
        try:
            return self.budget.run(lambda rows: (self._at(rows), self._run())[1])
        finally:
            self.lm.gate = None

    def _score_group(self, group, rows: int) -> list[MaskResult]:
        """One lm-eval evaluation per mask of ``group``, as many masks sharing each pass as ``rows``
        rows hold (all of them, unless an out-of-memory back-off left fewer rows than masks)."""
        self._at(rows)
        size = min(len(group), rows)
        results = []
        for start in range(0, len(group), size):
            gate = masks_to_gate(group[start:start + size], self.geometry)
            results.extend(self.lm.run_group(gate, self._run))
        return results

    def _run(self) -> MaskResult:
        """One lm-eval evaluation with whatever gate or mask group the LM holds.

        The few-shot sampler is re-seeded first (with simple_evaluate's default seed): lm-eval
        draws few-shot examples from one random stream per task, so without it every mask after
        the first would see other examples (GSM8K's 5 shots) and the scores would differ by
        more than the mask. Code tasks need ``confirm_run_unsafe_code``; the real opt-in is the
        config's ``data.allow_code_execution``, checked by their loaders.
        """
        for task in self.task_dict["tasks"].values():
            task.set_fewshot_seed(FEWSHOT_SEED)
        name = self.task.lm_eval_task
        chosen = None if self.task.doc_ids is None else {name: list(self.task.doc_ids)}
        output = evaluate(
            lm=self.lm, task_dict=self.task_dict, samples=chosen, bootstrap_iters=0, log_samples=True,
            apply_chat_template=self.task.chat, verbosity="WARNING", confirm_run_unsafe_code=True,
        )
        metrics = output["results"][name]
        if self.task.metric_key not in metrics:
            known = sorted(k for k in metrics if "," in k and not k.endswith("_stderr,none"))
            raise ValueError(
                f"task {name} reports no metric {self.task.metric_key!r}; it reports {known}"
            )
        samples = [compact_sample(s, self.task.metric) for s in output["samples"][name]]
        return MaskResult(float(metrics[self.task.metric_key]), samples, self.task.metric)

    def evaluate_mask(self, mask) -> MaskResult:
        """Score one mask (1 = ablated), a vector over all heads."""
        mask = np.asarray(mask)
        gate = masks_to_gate(mask, self.geometry) if mask.any() else None
        return self.evaluate(gate)

    def evaluate_masks(self, masks, *, progress: bool = True, desc: str = "masks", bar=None) -> list[MaskResult]:
        """Score each row of ``masks`` (M x N, 1 = ablated), ``masks_per_pass`` at a time. ``bar``:
        a tqdm bar of the caller's to advance (one bar over many calls) instead of a bar of its own."""
        masks = np.atleast_2d(masks)
        results: list[MaskResult] = []
        # masks that agree on the most leading layers side by side: a group runs those layers once per document
        order = shared_order(masks) if self.masks_per_pass > 1 else np.arange(len(masks))
        own = tqdm(total=len(masks), desc=desc, disable=not progress) if bar is None else contextlib.nullcontext(bar)
        with own as bar:
            for start in range(0, len(masks), self.masks_per_pass):
                group = masks[order[start:start + self.masks_per_pass]]
                if self.masks_per_pass == 1:
                    results.append(self.evaluate_mask(group[0]))
                else:  # one lm-eval evaluation per mask, sharing the group's forward passes; the
                    # whole group again after an out-of-memory error (its answers are computed afresh)
                    results.extend(self.budget.run(lambda rows, group=group: self._score_group(group, rows)))
                bar.update(len(group))
        return [results[i] for i in np.argsort(order)]


def compact_sample(sample: dict, metric: str) -> dict:
    """The parts of an lm-eval sample record worth keeping for inspection."""
    response = sample.get("filtered_resps", sample.get("resps"))
    while isinstance(response, list) and len(response) == 1:
        response = response[0]
    name = metric.split(",")[0]
    return {"doc_id": sample["doc_id"], "target": sample.get("target"), "response": response,
            name: sample.get(name)}


def load_evaluator(location: str, task: TaskSpec, *, dtype="float32", device="cpu", device_map=None,
                   batch_size=BATCH_SIZE, masks_per_pass=1, include_path=TASKS_DIR, log=None) -> MaskEvaluator:
    """Load the model at ``location`` once and build an evaluator for ``task`` (arguments: see
    :func:`~headloc.model.loading.load_model` and :class:`MaskEvaluator`)."""
    check_grouping(batch_size, masks_per_pass, device)
    model, tokenizer = load_model(location, dtype=dtype, device=device, device_map=device_map)
    return MaskEvaluator(model, tokenizer, task, batch_size=batch_size,
                         masks_per_pass=masks_per_pass, include_path=include_path, log=log)
