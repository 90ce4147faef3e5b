"""``headloc.locate``: which heads of a loaded model carry a task, in one call::

    import headloc

    found = headloc.locate(model, tokenizer, "headloc_ioi", method="cs_stratified", budget=100)
    found.ranking[:5], found.label, found.n_evals
    found.heatmap(); found.validate(tasks=["headloc_capitals"]); found.to_frame(); found.save("ioi-search")

The search is the workflow's: :func:`headloc.methods.driver.drive` makes the calls its rules make
(the steps of :mod:`headloc.methods.steps`: mask design, scoring, refinement, greedy rounds,
gradient job, draw, then the recovery that ranks the heads); only the scoring runs here, on your model,
through the engine the workflow's scoring jobs use. The defaults are the workflow's
(config/schema.yaml): budget 100 masks, sparsity 0.05, Lasso penalty by cross-validation, seed 0,
top 5, 16 rows per forward pass, 8 masks per pass.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headloc import methods
from headloc.api.tasks import Task, count_documents, mask_scorer, resolve_task
from headloc.heads import HeadGeometry, headset_mask
from headloc.io import write_json
from headloc.methods.driver import drive

DEFAULTS = {"budget": 100, "sparsity": 0.05, "alpha": "cv", "seed": 0, "top_k": 5,
            "batch_size": 16, "masks_per_pass": 8}  # config/schema.yaml's search and model defaults
LOG = logging.getLogger("headloc.locate")


def locate(model, tokenizer, task, *, method: str = "cs_stratified", budget: int | None = None, top_k: int = 5,
           seed: int = 0, sparsity: float = 0.05, alpha="cv", options: dict | None = None, documents=None,
           metric: str | None = None, chat: bool = False, include_path=(), dataset_kwargs: dict | None = None,
           batch_size: int | str = 16, masks_per_pass: int = 8, model_name: str | None = None,
           higher_is_better: bool | None = None, progress: bool = True) -> "Located":
    """Search ``model`` for the heads that carry ``task``; return a :class:`Located`.

    model, tokenizer : a loaded transformers causal LM (any device and dtype headloc can ablate)
        and its tokenizer (None for a callable task).
    task : an lm-eval task name (headloc's tasks, ``include_path``, lm-eval's registry), the path
        of a task YAML (its folder is searched for includes and utils), or a callable
        ``task(model) -> float`` that scores the model (called with the heads of a mask ablated).
    method : a registered search method (``headloc.methods.names()``).
    budget : masks a budgeted method spends (compressed sensing, and the most a sequential search
        spends; default 100); others take none.
    top_k : heads to report and validate; also greedy's rounds and cs_adaptive's target.
    seed, sparsity, alpha : the mask design's seed, the share of heads a mask ablates, the Lasso
        penalty (``"cv"``: cross-validated).
    options : a gradient or sequential method's hyperparameters (e.g. CHG's ``{"steps": 50}``,
        Thompson sampling's ``{"reward": "damage"}``), over its defaults.
    documents : which documents the search scores (see :func:`headloc.api.tasks.resolve_task`).
    metric, chat, dataset_kwargs : the lm-eval metric (default: the task's first), chat template,
        arguments of the task's document loader.
    batch_size, masks_per_pass : rows per forward pass (or ``"auto"``; a pass that runs out of GPU
        memory is retried with half the rows), masks sharing one pass (the result does not depend on them).
    higher_is_better : the metric's direction, read from an lm-eval task (give it only where the task
        and lm-eval declare none); a callable's score is higher-is-better unless this is False.
    """
    spec = methods.get(method)
    budget = _budget(spec, budget)
    _check_search(top_k=top_k, seed=seed, sparsity=sparsity, alpha=alpha)
    resolved = resolve_task(task, metric=metric, chat=chat, documents=documents, include_path=include_path,
                            dataset_kwargs=dataset_kwargs, higher_is_better=higher_is_better)
    if spec.kind == "gradient" and resolved.callable:
        raise ValueError(f"method {method!r} differentiates the gold continuations of an lm-eval task; "
                         f"a callable task has none. Use an lm-eval task, or one of "
                         f"{', '.join(methods.names(kind='masks') + methods.names(kind='rounds'))}")
    method_options = spec.with_defaults(options) if spec.options else dict(options or {})
    work = tempfile.TemporaryDirectory(prefix="headloc-locate-")  # the files drive writes, kept for save()
    score = _scorer(spec, resolved, model, tokenizer, batch_size, masks_per_pass, progress)
    gradient = _gradient(spec, resolved, model, tokenizer, method_options)
    found = drive(spec, score, HeadGeometry.of(model.config), work.name, budget=budget, seed=seed, k=top_k,
                  sparsity=sparsity, alpha=alpha, gradient=gradient, higher_is_better=resolved.higher_is_better,
                  options=method_options, log=LOG)
    n_docs = count_documents(resolved)
    search = _search_id(spec, n_docs, seed=seed, budget=budget, sparsity=sparsity, top_k=top_k,
                        options=method_options)
    record = {"model": model_name or _model_name(model), "task": resolved.name, "search": search, **found}
    parameters = {"method": method, "budget": budget, "top_k": top_k, "seed": seed, "sparsity": sparsity,
                  "alpha": alpha, "options": method_options, "n_docs": n_docs,
                  "metric": None if resolved.callable else resolved.spec.metric_key}
    return Located(record=record, parameters=parameters, task=resolved, model=model, tokenizer=tokenizer,
                   batch_size=batch_size, work=work)


def _budget(spec, budget):
    if spec.budgeted:
        budget = DEFAULTS["budget"] if budget is None else budget
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise ValueError(f"budget must be a positive number of masks for {spec.name}, got {budget!r}")
        return int(budget)
    if budget is not None:
        raise ValueError(f"method {spec.name!r} spends no mask budget (budget={budget!r}); the budgeted "
                         f"methods are {', '.join(n for n in methods.names() if methods.get(n).budgeted)}")
    return 0


def _check_search(*, top_k, seed, sparsity, alpha) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(sparsity, (int, float)) or not 0 < sparsity < 1:
        raise ValueError(f"sparsity must lie in (0, 1), got {sparsity!r}")
    if alpha != "cv" and (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha < 0):
        raise ValueError(f"alpha must be 'cv' or a number >= 0, got {alpha!r}")


def _scorer(spec, task: Task, model, tokenizer, batch_size, masks_per_pass, progress):
    """The driver's ``score(masks)``; a method that scores nothing (gradient, draw) never calls it."""
    if not spec.scored:
        return None
    score = mask_scorer(task, model, tokenizer, batch_size=batch_size, masks_per_pass=masks_per_pass,
                        progress=progress)
    return lambda masks: score(masks, desc=f"{spec.name} masks")


def _gradient(spec, task: Task, model, tokenizer, options):
    if spec.kind != "gradient":
        return None
    from headloc.engine.supervision import task_examples

    return model, task_examples(tokenizer, task.spec, include_path=task.folders), options


def _search_id(spec, n_docs, *, seed, budget, sparsity, top_k, options) -> str:
    """The workflow's directory name of the same search (headloc.workflow.plan.Plan.search_id with
    no universal filter and no separate scoring task); a callable task's documents are unknown."""
    tail = f"n{n_docs}_s{seed}" if n_docs is not None else f"s{seed}"
    parts = methods.SearchParts(tail=tail, seed=seed, n_masks=budget, sparsity=sparsity, top_k=top_k,
                                options=options)
    return spec.search_id(parts)


def _model_name(model) -> str:
    path = getattr(model.config, "name_or_path", "") or getattr(model, "name_or_path", "")
    return Path(str(path)).name or type(model).__name__


@dataclass
class Validation:
    """Delta Task and Delta Gen (percentage points) of ablating the top ``k`` heads, as in Table 2;
    ``scores`` holds each task's metric unablated and ablated."""

    k: int
    heads: list
    delta_task: float
    delta_gen: float
    scores: object  # pandas DataFrame: task, metric, n_docs, clean, ablated, delta


@dataclass
class Located:
    """One search's result: the ``recovery.json`` record the workflow would write, and ways to use it."""

    record: dict
    parameters: dict
    task: Task = field(repr=False)
    model: object = field(repr=False)
    tokenizer: object = field(repr=False)
    batch_size: int = field(default=16, repr=False)
    work: object = field(default=None, repr=False)  # the driver's files (masks, scores, rounds)

    @property
    def ranking(self) -> list[str]:
        return list(self.record["ranking"])

    @property
    def values(self) -> dict:
        """Head -> the method's per-head value (what it means: :attr:`label`)."""
        return dict(self.record["coef"])

    @property
    def label(self) -> str:
        return methods.get(self.record["method"]).label

    @property
    def top_heads(self) -> list[str]:
        return list(self.record["top_heads"])

    @property
    def n_evals(self) -> int:
        return self.record["n_evals"]

    @property
    def search(self) -> str:
        return self.record["search"]

    def heatmap(self):
        """The workflow's heatmap of this search (a matplotlib Figure)."""
        from headloc.report.heatmap import heatmap_figure

        return heatmap_figure(self.record, top_k=len(self.top_heads))

    def to_frame(self):
        """The tidy table: model, task, search, head, layer, index, value, rank."""
        from headloc.report.export import tidy_frame

        return tidy_frame([self.record])

    def save(self, folder, *, mib_task: str | None = None, mib_model: str | None = None) -> Path:
        """Write what the workflow's search folder holds (recovery.json, heatmap.png, the masks,
        scores or rounds the search made) and the exports: heads.csv and ``mib/``, a MIB submission
        of this search (``mib/<task>_<model>/importances.json`` and ``mib/headloc.tsv``), its folder
        named by MIB's task and model names when given (``mib_task="ioi"``, ``mib_model="gpt2"``),
        else by this search's; return the folder."""
        from headloc.report.export import mib_cfg, write_submission, write_tidy
        from headloc.report.heatmap import save_heatmap

        if self.model is None:
            raise ValueError("save() needs the searched model (Located.model): MIB's graph config is read from it")
        folder, record = Path(folder), self.record
        if self.work is not None:
            shutil.copytree(self.work.name, folder, dirs_exist_ok=True)
        write_json(folder / "recovery.json", record)
        save_heatmap(record, folder / "heatmap.png", top_k=len(self.top_heads), format="png")
        write_tidy(folder / "heads.csv", [record])
        write_submission(folder / "mib", [record], {record["model"]: mib_cfg(self.model.config)},
                         tasks={record["task"]: mib_task} if mib_task else None,
                         models={record["model"]: mib_model} if mib_model else None)
        return folder

    def validate(self, tasks=(), *, k: int | None = None, documents=None, progress: bool = True) -> Validation:
        """Ablate the top ``k`` heads (default: the top k of the search) and score the searched task
        on all its documents and each of ``tasks`` (lm-eval names or YAML paths, or a dict
        name -> task; a callable task's are callables): Delta Task is the first, Delta Gen the
        mean of the others. ``documents`` restricts the searched task's documents (as
        :func:`locate`'s), or is a dict task name -> documents for any of them."""
        import pandas as pd

        k = len(self.top_heads) if k is None else k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(self.ranking):
            raise ValueError(f"k must be an integer from 1 to {len(self.ranking)} (the model's heads), got {k!r}")
        chosen = documents if isinstance(documents, dict) else {self.task.name: documents}
        heads = self.ranking[:k]
        mask = headset_mask(heads, self.record["n_layers"], self.record["n_heads"])
        rows = [self._score(self._full_task(chosen.get(self.task.name)), mask, progress)]
        for name, other in _named(tasks):
            task = self._other_task(other, chosen.get(name))
            rows.append({**self._score(task, mask, progress), "task": name})
        frame = pd.DataFrame(rows)
        frame["delta"] = 100.0 * (frame["ablated"] - frame["clean"])
        gen = frame["delta"].iloc[1:]
        return Validation(k=k, heads=heads, delta_task=float(frame["delta"].iloc[0]),
                          delta_gen=float(gen.mean()) if len(gen) else float("nan"), scores=frame)

    def _full_task(self, documents) -> Task:
        from dataclasses import replace

        from headloc.api.tasks import choose_documents

        if self.task.callable:
            return self.task
        spec = self.task.spec  # without the search's documents: all of the task's, or those asked for
        kwargs = {key: value for key, value in spec.dataset_kwargs.items() if key != "data_file"}
        full = replace(spec, doc_ids=None, dataset_kwargs=kwargs)
        return replace(self.task, spec=choose_documents(full, documents))

    def _other_task(self, other, documents) -> Task:
        if callable(other):
            return resolve_task(other)
        if self.task.callable:
            raise ValueError(f"validate(tasks=...) of a callable task takes callables, got {other!r}")
        return resolve_task(other, chat=self.task.spec.chat, documents=documents,
                            include_path=self.task.folders[1:])

    def _score(self, task: Task, mask, progress) -> dict:
        score = mask_scorer(task, self.model, self.tokenizer, batch_size=self.batch_size, masks_per_pass=1,
                            progress=progress)
        clean, ablated = score(np.vstack([np.zeros_like(mask), mask]), desc=f"validate {task.name}")
        return {"task": task.name, "metric": None if task.callable else task.spec.metric_key,
                "n_docs": count_documents(task), "clean": clean, "ablated": ablated}


def _named(tasks):
    """``tasks`` as (name, task) pairs: a dict's items, else each task named by itself."""
    if isinstance(tasks, dict):
        return list(tasks.items())
    if isinstance(tasks, (str, Path)) or callable(tasks):
        tasks = [tasks]
    return [(getattr(t, "__name__", str(t)), t) for t in tasks]
