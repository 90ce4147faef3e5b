"""``headloc.locate``: which heads of a loaded model carry a task, in one call::

    import headloc

    found = headloc.locate(model, tokenizer, "headloc_ioi", method="cs_stratified", budget=100)
    found.ranking[:5], found.label, found.n_evals
    found.heatmap(); found.validate(tasks=["headloc_capitals"]); found.to_frame(); found.save("ioi-search")

The search is the workflow's: :func:`headloc.methods.driver.drive` makes the calls its rules make
(the steps of its kind, :mod:`headloc.methods.kinds`: mask design, scoring, refinement, greedy
rounds, gradient job, sequential or guided search, draw, then the recovery that ranks the heads); only the scoring runs here, on your model,
through the engine the workflow's scoring jobs use. The defaults are the workflow's
(config/schema.yaml): budget 100 masks, sparsity 0.05, Lasso penalty by cross-validation, seed 0,
top 5, 16 rows per forward pass, 8 masks per pass.

For a notebook: the model is searched in eval() mode and given back in the mode it came in; a
search shows one progress bar, ``progress=False`` none (lm-eval's own bars and messages are always
off); the result shows itself in a few
lines, or as HTML with its heatmap; what cannot be searched is refused before any work.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import logging
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from headloc import methods
from headloc.api.tasks import Task, count_documents, mask_scorer, resolve_task
from headloc.heads import HeadGeometry, headset_mask
from headloc.io import write_json
from headloc.methods.driver import drive
from headloc.methods.settings import SearchSettings

SETTINGS = SearchSettings()  # the workflow's search defaults: every default of a search here is one of these
METHOD = SETTINGS.methods[0]  # and so is the method (headloc.methods.settings.DEFAULT_METHOD)
BATCH_SIZE, MASKS_PER_PASS = 16, 8  # config/schema.yaml's models.<name>.batch_size and masks_per_pass
LOG = logging.getLogger("headloc.locate")


def locate(model, tokenizer, task, *, method: str = METHOD, budget: int | None = None,
           top_k: int = SETTINGS.top_k, seed: int = SETTINGS.seed, sparsity: float = SETTINGS.sparsity,
           alpha=SETTINGS.alpha, options: dict | None = None, documents=None, metric: str | None = None,
           chat: bool = False, include_path=(), dataset_kwargs: dict | None = None,
           batch_size: int | str = BATCH_SIZE, masks_per_pass: int = MASKS_PER_PASS, model_name: str | None = None,
           higher_is_better: bool | None = None, progress: bool = True) -> "Located":
    """Search ``model`` for the heads that carry ``task``; return a :class:`Located`.

    model, tokenizer : a loaded transformers causal LM (any device and dtype headloc can ablate)
        and its tokenizer (None for a callable task). The search runs it in eval() mode and gives
        it back in the mode it came in.
    task : an lm-eval task name (headloc's tasks, ``include_path``, lm-eval's registry), the path
        of a task YAML (its folder is searched for includes and utils), or a callable
        ``task(model) -> float`` that scores the model (called with the heads of a mask ablated).
    method : a registered search method (``headloc.methods.names()``); default ``screened_greedy``,
        the workflow's default (config/schema.yaml), which needs an lm-eval task (it differentiates the gold continuations): name
        one that only scores masks (``group_testing``) for a callable task.
    budget : masks a budgeted method spends, the config's ``search.n_masks`` (compressed sensing, and
        the most a sequential search spends, the unablated row included; default 100); others take
        none. The least: 2 (a Lasso's fit; a sequential search's baseline and one mask), 3 for
        cs_adaptive (its kind's ``least_masks``).
    top_k : heads to report and validate; also greedy's rounds and cs_adaptive's target.
    seed, sparsity, alpha : the mask design's seed, the share of heads a mask ablates, the Lasso
        penalty (``"cv"``: cross-validated).
    options : a gradient, sequential or guided method's hyperparameters (e.g. CHG's ``{"steps": 50}``,
        Thompson sampling's ``{"reward": "damage"}``), over its defaults; a key the method does not
        have, or a value it does not take, is refused.
    documents : which documents the search scores (see :func:`headloc.api.tasks.resolve_task`).
    metric, chat, dataset_kwargs : the lm-eval metric (default: the task's first), chat template,
        arguments of the task's document loader.
    batch_size, masks_per_pass : rows per forward pass (or ``"auto"``; a pass that runs out of GPU
        memory is retried with half the rows), masks sharing one pass (the result does not depend on them).
    higher_is_better : the metric's direction, read from an lm-eval task (give it only where the task
        and lm-eval declare none); a callable's score is higher-is-better unless this is False.
    progress : one progress bar for the search (the masks it scores); False prints nothing but the
        result's warnings (the ``headloc.locate`` logger). lm-eval's own bars and messages are off
        either way.
    """
    spec, settings = check_search(method, budget, options, top_k=top_k, seed=seed, sparsity=sparsity, alpha=alpha)
    check_model(model, tokenizer, task)
    geometry = HeadGeometry.of(model.config)
    _check_least_on(spec, settings, geometry)
    resolved = resolve_task(task, metric=metric, chat=chat, documents=documents, include_path=include_path,
                            dataset_kwargs=dataset_kwargs, higher_is_better=higher_is_better)
    _check_gold(spec, resolved)
    _check_subset(resolved)
    work = tempfile.TemporaryDirectory(prefix="headloc-locate-")  # the files drive writes, kept for save()
    with evaluation_mode(model), _quiet(resolved), _search_bar(spec, settings, progress) as bar:
        score = _scorer(spec, resolved, model, tokenizer, batch_size, masks_per_pass, progress, bar)
        gradient = _gradient(spec, resolved, model, tokenizer)
        found = drive(spec, score, geometry, work.name, settings, gradient=gradient,
                      higher_is_better=resolved.higher_is_better, log=LOG)
        n_docs = count_documents(resolved)
    search = _search_id(spec, n_docs, settings)
    record = {"model": model_name or _model_name(model), "task": resolved.name, "search": search, **found}
    located = Located(record=record, parameters=_parameters(spec, settings, n_docs, resolved), task=resolved,
                      model=model, tokenizer=tokenizer, batch_size=batch_size, work=work)
    for warning in located.warnings:  # said last, where a notebook shows it under the bars
        LOG.warning("%s on %s: %s", located.search_id, located.record["task"], warning)
    return located


def _check_gold(spec, task: Task) -> None:
    """A method that differentiates the gold continuations needs an lm-eval task that has them: its
    own target, read from its YAML (:func:`headloc.data.documents.gold_problem`); a callable has none."""
    if not spec.kind.gold:
        return
    from headloc.workflow.config import mask_only_methods, no_gold_message

    if task.callable:
        raise ValueError(f"method {spec.name!r} differentiates the gold continuations of an lm-eval task; "
                         f"a callable task has none. Use an lm-eval task, or one of {', '.join(mask_only_methods())}")
    from headloc.data.documents import gold_problem, lm_eval_tasks_dir, load_task_yaml, task_yaml

    path = task_yaml(task.name, [*task.task_folders, lm_eval_tasks_dir()])
    config = load_task_yaml(path)
    reason = gold_problem(config)
    if reason:
        raise ValueError(f"method {no_gold_message([spec.name], task.name, path, reason, config)}")


def _check_subset(task: Task) -> None:
    """The documents asked for (``documents=``: a number, indices or a file) are at least two, as the
    workflow's identification subset (``search.id_docs``): one document has no spread to measure
    noise by, and what ablating a head does to it cannot be told from its quirks."""
    from headloc.workflow.config import MIN_ID_DOCS

    spec = None if task.callable else task.spec
    if spec is None or (spec.doc_ids is None and not spec.dataset_kwargs.get("data_file")):
        return  # the task's own documents: counted by lm-eval, after the search
    n_docs = count_documents(task)
    if n_docs < MIN_ID_DOCS:
        raise ValueError(f"documents: {n_docs} document{'s' if n_docs != 1 else ''} to search task {task.name!r} on; "
                         f"expected at least {MIN_ID_DOCS} (a number, indices or a file of them): what ablating a "
                         "head does to one document cannot be told from that document's quirks")


def _parameters(spec, settings: SearchSettings, n_docs, task: Task) -> dict:
    """What the search was asked, as :attr:`Located.parameters` holds it."""
    chosen = settings.options_of(spec)
    return {"method": spec.name, "budget": settings.n_masks if spec.budgeted else 0, "top_k": settings.top_k,
            "seed": settings.seed, "sparsity": settings.sparsity, "alpha": settings.alpha,
            "options": chosen.as_config() if chosen else {}, "n_docs": n_docs,
            "metric": None if task.callable else task.spec.metric_key}


def check_search(method: str, budget, options, *, top_k, seed, sparsity, alpha) -> tuple:
    """The search's arguments checked before any work: (the method, its :class:`SearchSettings`);
    ValueError naming a bad one and what would be valid."""
    spec = methods.get(method)
    n_masks = _n_masks(spec, budget)
    given = {} if options is None else options
    if not isinstance(given, Mapping):
        raise ValueError(f"options must be a dict of {spec.name}'s hyperparameters, got {options!r}")
    if given and spec.options is None:
        with_options = [name for name in methods.names() if methods.get(name).options]
        raise ValueError(f"method {spec.name!r} takes no options, got {dict(given)!r}; the methods with "
                         f"options are {', '.join(with_options)}")
    settings = SearchSettings(n_masks=n_masks, top_k=top_k, seed=seed, sparsity=sparsity, alpha=alpha,
                              options={spec.name: given} if spec.options else {})
    chosen = settings.options_of(spec)
    for option, text in chosen.problems(settings.top_k) if chosen else []:
        raise ValueError(f"options[{option!r}] of {spec.name}: {text}")
    return spec, settings


def _n_masks(spec, budget) -> int:
    """The method's ``n_masks``: ``budget``, or the default, for a budgeted method (refused below
    its least); the default, unused, for the others (which refuse a budget)."""
    if not spec.budgeted:
        if budget is not None:
            raise ValueError(f"method {spec.name!r} spends no mask budget (budget={budget!r}); the budgeted "
                             f"methods are {', '.join(methods.names(budgeted=True))}")
        return SETTINGS.n_masks
    budget = SETTINGS.n_masks if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise ValueError(f"budget must be a whole number of masks for {spec.name}, got {budget!r}")
    least, why = spec.kind.least_masks(spec)
    if budget < least:
        raise ValueError(f"budget {budget} is too small for {spec.name}: it needs at least {least} masks ({why})")
    return int(budget)


def _check_least_on(spec, settings: SearchSettings, geometry: HeadGeometry) -> None:
    """A method whose least budget depends on the model (group testing: the baseline and one whole
    partition) refuses a smaller one before any work, as the workflow's config check does."""
    if not spec.budgeted or spec.least_budget is None:
        return
    least, setting, need = spec.least_budget(geometry.total, settings.top_k, settings.options_of(spec))
    if settings.n_masks < least:
        raise ValueError(f"budget {settings.n_masks} is too small for {spec.name} on this model ({geometry.total} "
                         f"heads, {setting}): it needs at least {least} masks ({need}); give budget >= {least}")


def check_model(model, tokenizer, task) -> None:
    """Refuse, before any work, what cannot be searched: a tokenizer (or anything but a transformers
    model) where the model goes, a model where the tokenizer goes, and, where an lm-eval task reads the
    next-token logits, a model without a language-model head or a missing tokenizer."""
    import torch
    from transformers import PreTrainedTokenizerBase

    if isinstance(model, PreTrainedTokenizerBase):
        raise TypeError(f"model is a tokenizer ({type(model).__name__}); pass the model first, then its "
                        "tokenizer: locate(model, tokenizer, task)")
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise TypeError(f"model must be a loaded transformers model (a torch module with a config), "
                        f"got {type(model).__name__}")
    if isinstance(tokenizer, torch.nn.Module):
        raise TypeError(f"tokenizer is a model ({type(tokenizer).__name__}); pass the model first, then its "
                        "tokenizer: locate(model, tokenizer, task)")
    if callable(task):  # it scores the model its own way
        return
    if tokenizer is None:
        raise ValueError(f"lm-eval task {str(task)!r} needs the model's tokenizer; got tokenizer=None")
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise TypeError(f"tokenizer must be a transformers tokenizer (AutoTokenizer.from_pretrained), "
                        f"got {type(tokenizer).__name__}")
    lm_head = getattr(model, "get_output_embeddings", lambda: None)()
    if lm_head is None:
        raise TypeError(f"model {type(model).__name__} has no language-model head (get_output_embeddings() is "
                        "None), but an lm-eval task scores next-token logits: load it with "
                        "AutoModelForCausalLM (e.g. GPT2LMHeadModel, not GPT2Model)")


@contextlib.contextmanager
def evaluation_mode(model):
    """``model`` in eval() mode while open (no dropout in a score or a gradient), then every module
    back in the mode it had: a model passed in train() mode comes back in train() mode."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training


def _quiet(task: Task):
    """lm-eval's own bars and messages off (a callable task runs no lm-eval): headloc's bar says
    how far a search or a validation is, lm-eval's would add one per mask."""
    if task.callable:
        return contextlib.nullcontext()
    from headloc.engine.lm_eval_tasks import lm_eval_quiet

    return lm_eval_quiet()


def _search_bar(spec, settings: SearchSettings, progress: bool):
    """One bar for the whole search, over every call of its ``score(masks)`` (a greedy method's
    rounds, a sequential search's proposals): the masks scored, out of the budget where the method
    spends one. None when ``progress`` is off or the method scores no masks."""
    if not (progress and spec.scored):
        return contextlib.nullcontext()
    from tqdm.auto import tqdm

    return _logged_above(tqdm(total=settings.n_masks if spec.budgeted else None, desc=f"{spec.name} masks",
                              unit="mask"))


@contextlib.contextmanager
def _logged_above(bar):
    """``bar``, with what the search logs while it is drawn (its evidence: "no head found above
    noise") printed on a line above it instead of glued to its end. Only where Python's last-resort
    handler would print the line (no handler on this logger or the root): a handler a user set up
    keeps the record as it is."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    redirect = not (LOG.handlers or logging.getLogger().handlers)
    with bar, (logging_redirect_tqdm([LOG], tqdm_class=type(bar)) if redirect else contextlib.nullcontext()):
        yield bar


def _scorer(spec, task: Task, model, tokenizer, batch_size, masks_per_pass, progress, bar=None):
    """The driver's ``score(masks)``; a method that scores nothing (gradient, draw) never calls it."""
    if not spec.scored:
        return None
    score = mask_scorer(task, model, tokenizer, batch_size=batch_size, masks_per_pass=masks_per_pass,
                        progress=progress, bar=bar, per_doc=True)
    return lambda masks: score(masks, desc=f"{spec.name} masks")


def _gradient(spec, task: Task, model, tokenizer):
    if not spec.kind.gold:
        return None
    from headloc.engine.supervision import task_examples

    return model, task_examples(tokenizer, task.spec, include_path=task.task_folders)


def _search_id(spec, n_docs, settings: SearchSettings) -> str:
    """The workflow's directory name of the same search (headloc.workflow.plan.Plan.search_id with
    no universal filter and no separate scoring task); a callable task's documents are unknown."""
    tail = f"n{n_docs}_s{settings.seed}" if n_docs is not None else f"s{settings.seed}"
    parts = methods.SearchParts(tail=tail, seed=settings.seed, n_masks=settings.n_masks, sparsity=settings.sparsity,
                                top_k=settings.top_k, options=settings.options_of(spec))
    return spec.search_id(parts)


def _model_name(model) -> str:
    path = getattr(model.config, "name_or_path", "") or getattr(model, "name_or_path", "")
    return Path(str(path)).name or type(model).__name__


def direction_words(higher_is_better: bool) -> str:
    return "higher is better: a drop is damage" if higher_is_better else "lower is better: a rise is damage"


def change_words(unit: str, metric: str | None) -> str:
    """What a change in ``unit`` (:func:`headloc.workflow.results.display_score`'s) is a change of."""
    name = metric.split(",")[0] if metric else "score"
    return {"points": f"percentage points of {name}", "relative": f"% of the unablated {name}",
            "own": name}[unit]


def _number(value, sign: str = "+") -> str:
    value = float(value) + 0.0  # the Lasso's -0.0 reads as 0.0
    return f"{value:{sign},.1f}" if abs(value) >= 10 or value == 0 else f"{value:{sign}.4g}"


@dataclass(repr=False)
class Validation:
    """Delta Task and Delta Gen of ablating the top ``k`` heads, each task's change in its own unit as
    Table 2 shows it (``unit``: percentage points for a fraction metric, percent of the unablated score
    for a task named relative, else the metric's own unit, e.g. a perplexity).

    ``delta_task``: the searched task's change, and ``delta_gen``: the mean change of the other
    tasks, each signed as Table 2 signs them, so that negative is damage (a lower-is-better task's
    change negated: a perplexity that rises by 925.6 gives -925.6). ``scores``: each task's metric
    unablated (``clean``) and ablated, its ``unit``, direction and ``delta``, the change as measured
    (that perplexity's +925.6)."""

    k: int
    heads: list
    delta_task: float
    delta_gen: float
    scores: object  # pandas DataFrame: task, metric, unit, higher_is_better, n_docs, clean, ablated, delta

    def __repr__(self) -> str:
        first = self.scores.iloc[0]
        lines = [f"Validation of the top {self.k} heads: {', '.join(self.heads)}",
                 f"Delta Task {_number(self.delta_task)} {change_words(first['unit'], first['metric'])} "
                 "(signed so that negative is damage)"]
        if len(self.scores) > 1:
            others = len(self.scores) - 1
            lines.append(f"Delta Gen {_number(self.delta_gen)} (mean over {others} other task{'s' * (others > 1)}, "
                         "each signed so that negative is damage)")
        for row in self.scores.itertuples():
            lines.append(f"  {row.task}: {_number(row.clean, '')} -> {_number(row.ablated, '')}, "
                         f"{_number(row.delta)} {change_words(row.unit, row.metric)} "
                         f"({direction_words(row.higher_is_better)})")
        return "\n".join(lines)


@dataclass(repr=False)
class Located:
    """One search's result: the ``recovery.json`` record the workflow would write, and ways to use it.
    In a notebook it shows itself as its top heads, their values and its heatmap."""

    record: dict
    parameters: dict
    task: Task
    model: object
    tokenizer: object
    batch_size: int = 16
    work: object = None  # the driver's files (masks, scores, rounds)

    @property
    def ranking(self) -> list[str]:
        return list(self.record["ranking"])

    @property
    def values(self) -> dict:
        """Head -> the method's per-head value (what it means: :attr:`label`)."""
        return dict(self.record["coef"])

    @property
    def label(self) -> str:
        """What :attr:`values` mean: the method's label, and for a lower-is-better metric that the
        values are of the negated metric (the searches rank by it), so that its rise shows as a drop."""
        label = methods.get(self.record["method"]).label
        if self.record.get("higher_is_better") is False:
            metric = (self.parameters.get("metric") or "the score").split(",")[0]
            label += (f", of -{metric} ({metric} is lower-is-better: a rise is damage, and shows here as "
                      "a negative change)")
        return label

    @property
    def warnings(self) -> list[str]:
        """What the search says its result lacks (e.g. a cap reached before its top k was confirmed)."""
        return list(self.record.get("warnings", []))

    @property
    def top_heads(self) -> list[str]:
        return list(self.record["top_heads"])

    @property
    def found(self) -> list[str] | None:
        """The heads found above the noise, most damaging first (:mod:`headloc.search.evidence`): empty
        when none was (:attr:`no_head_found` says why), None when the search assessed none."""
        found = self.record.get("found")
        return None if found is None else list(found)

    @property
    def no_head_found(self) -> str:
        """Why no head was found above the noise, or why none was assessed; empty when one was found."""
        return self.record.get("no_head_found", "")

    @property
    def intervals(self) -> dict:
        """Head -> the 95 % interval of its value under document resampling, [low, high]; None where it
        has none (an unmeasured head, a search that assessed none)."""
        return dict(self.record.get("interval") or {})

    @property
    def n_evals(self) -> int:
        return self.record["n_evals"]

    @property
    def search_id(self) -> str:
        """The search's id: the directory name the workflow would give the same search."""
        return self.record["search"]

    SHOWN = 10  # top heads a repr lists

    def _top(self) -> list[tuple[str, str]]:
        """The first :attr:`SHOWN` top heads and their values as text, each with its 95 % interval and
        P(top k) where it has them."""
        from headloc.search.evidence import head_evidence

        shown = []
        for head in self.top_heads[: self.SHOWN]:
            value, interval, p = head_evidence(self.record, head, value_digits=4)
            shown.append((head, " ".join([value, *([interval] if interval else []), *([f"P {p}"] if p else [])])))
        return shown

    @property
    def evidence(self) -> str:
        """One line: the heads found above the noise, or "no head found above noise" and why."""
        if self.found is None:
            return f"evidence: {self.no_head_found or 'not assessed'}"
        if not self.found:
            return f"no head found above noise: {self.no_head_found}"
        return f"found above noise: {', '.join(self.found)}"

    def _title(self) -> str:
        return (f"{self.record['method']} on {self.record['task']} (model {self.record['model']}): "
                f"{self.n_evals} evaluations, search {self.search_id}")

    def __repr__(self) -> str:
        more = len(self.top_heads) - self.SHOWN
        top = ", ".join(f"{head} {value}" for head, value in self._top()) + (f", ... {more} more" if more > 0 else "")
        lines = [f"<Located {self._title()}>", self.evidence, f"top {len(self.top_heads)}: {top}",
                 f"value: {self.label} [95 % interval over resampled documents] P(in the top k)"]
        lines += [f"warning: {_cut(warning, 200)}" for warning in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A notebook's view: the same facts, every warning, and the heatmap as an inline PNG."""
        buffer = io.BytesIO()
        self.heatmap().savefig(buffer, format="png")
        png = base64.b64encode(buffer.getvalue()).decode("ascii")
        rows = "".join(f"<tr><td>{rank}</td><td>{html.escape(head)}</td><td>{value}</td></tr>"
                       for rank, (head, value) in enumerate(self._top(), 1))
        warned = "".join(f"<li>warning: {html.escape(warning)}</li>" for warning in self.warnings)
        return (f"<div><p><b>Located</b> {html.escape(self._title())}</p><p>{html.escape(self.evidence)}</p>"
                f"<p>value: {html.escape(self.label)}</p>"
                f"<table><tr><th>rank</th><th>head</th><th>value</th></tr>{rows}</table>"
                + (f"<ul>{warned}</ul>" if warned else "")
                + f'<img alt="heatmap of {html.escape(self.search_id)}" src="data:image/png;base64,{png}"/></div>')

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

    def validate(self, tasks=(), *, k: int | None = None, documents=None, units: Mapping | None = None,
                 progress: bool = True) -> Validation:
        """Ablate the top ``k`` heads (default: the top k of the search) and score the searched task
        on all its documents and each of ``tasks`` (lm-eval names or YAML paths, or a dict
        name -> task; a callable task's are callables): Delta Task is the first, Delta Gen the
        mean of the others (see :class:`Validation`). ``documents`` restricts the searched task's
        documents (as :func:`locate`'s), or is a dict task name -> documents for any of them.
        ``units``: task name -> how its change is shown, ``"points"``, ``"relative"`` (percent of
        its unablated score, as the workflow's ``tasks.<name>.relative``) or ``"own"``; by default
        percentage points for a fraction metric (accuracy, exact match, ...), else its own unit (a
        callable's score included)."""
        import pandas as pd

        k = len(self.top_heads) if k is None else k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(self.ranking):
            raise ValueError(f"k must be an integer from 1 to {len(self.ranking)} (the model's heads), got {k!r}")
        chosen = documents if isinstance(documents, dict) else {self.task.name: documents}
        named = [(self.task.name, self._full_task(chosen.get(self.task.name)))]
        named += [(name, self._other_task(other, chosen.get(name))) for name, other in _named(tasks)]
        shown = _units(units, named)
        heads = self.ranking[:k]
        mask = headset_mask(heads, self.record["n_layers"], self.record["n_heads"])
        with evaluation_mode(self.model), _quiet(self.task):
            frame = pd.DataFrame([{"task": name, **self._score(task, mask, shown[name], progress)}
                                  for name, task in named])
        signed = frame["delta"].where(frame["higher_is_better"], -frame["delta"])  # negative: damage (Table 2)
        gen = signed.iloc[1:]
        return Validation(k=k, heads=heads, delta_task=float(signed.iloc[0]),
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
                            include_path=self.task.task_folders[1:])

    def _score(self, task: Task, mask, unit: str, progress) -> dict:
        """The task unablated and with ``mask`` ablated, and the change in ``unit``."""
        from headloc.workflow.results import display_score

        score = mask_scorer(task, self.model, self.tokenizer, batch_size=self.batch_size, masks_per_pass=1,
                            progress=progress)
        clean, ablated = score(np.vstack([np.zeros_like(mask), mask]), desc=f"validate {task.name}")
        try:
            delta = display_score(ablated, clean, unit) - display_score(clean, clean, unit)
        except ValueError as error:  # a non-fraction shown in points
            raise ValueError(f"task {task.name!r}: {error}; show it in another unit, e.g. "
                             f"units={{{task.name!r}: 'own'}}") from None
        return {"metric": None if task.callable else task.spec.metric_key, "unit": unit,
                "higher_is_better": task.higher_is_better, "n_docs": count_documents(task), "clean": clean,
                "ablated": ablated, "delta": delta}


def _units(units: Mapping | None, named: list) -> dict[str, str]:
    """Each validated task's display unit: ``units``' where given, else points for a fraction metric
    and the metric's own unit otherwise (a callable's score, whose metric headloc cannot know)."""
    from headloc.data.documents import is_fraction
    from headloc.workflow.results import UNITS

    units = dict(units or {})
    names = [name for name, _ in named]
    for name, unit in units.items():
        if name not in names:
            raise ValueError(f"units names task {name!r}, which is not validated; the tasks are {', '.join(names)}")
        if unit not in UNITS:
            raise ValueError(f"units[{name!r}] is {unit!r}; expected one of {', '.join(UNITS)}")
    return {name: units.get(name) or ("points" if not task.callable and is_fraction(task.spec.metric) else "own")
            for name, task in named}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _named(tasks):
    """``tasks`` as (name, task) pairs: a dict's items, else each task named by itself."""
    if isinstance(tasks, dict):
        return list(tasks.items())
    if isinstance(tasks, (str, Path)) or callable(tasks):
        tasks = [tasks]
    return [(getattr(t, "__name__", str(t)), t) for t in tasks]
