"""The contract every search method fulfils, and the recovery steps several methods share.

A method module of :mod:`headloc.methods` declares one or more :class:`Method` in a module-level
``METHODS`` tuple. The declaration is metadata and small functions; what is heavy (torch, sklearn,
lm-eval) is imported inside those functions, so that reading the registry (the Snakefile does, at
parse time) stays fast.

A method's kind (:mod:`headloc.methods.kinds`: masks, rounds, gradient, sequential, guided, draw) decides
how it spends its evaluations: the steps and rules that run it, and what its ``algorithm`` is
(a mask design, a gradient fit, a sequential search's builder, a guided search, or none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from headloc.heads import TOP_K
from headloc.methods.kinds import Kind, get as kind_named

# How to read a heatmap whose cells are score changes (report/heatmap.rst shows a method's ``reading``).
SCALE = ("The red-blue scale is centred at 0 and runs to the largest effect either way: red cells lower the\n"
         "score when ablated (the head helps the task), blue cells raise it.")


def lasso_reading(design: str) -> str:
    """The heatmap caption of a method whose cells are eq. (1)'s Lasso coefficients."""
    return f"""Each cell is the head's Lasso coefficient from eq. (1): the estimated change in the task's score
(a fraction: -0.10 is 10 points of accuracy) when the head is ablated, fitted to the scores of
random masks ({design}).
Heads the Lasso set to exactly 0 are ranked by their marginal effect (mean score with the head
ablated minus without): an outlined white cell is such a head. The title's last line gives each
outlined head's probability of being in the top k, by rank: the share of 100 bootstrap refits of the Lasso
(rows resampled, same penalty) that keep it there (``top_k_probability`` in ``recovery.json``).

{SCALE}"""


@dataclass(frozen=True)
class SearchParts:
    """What a search's directory name may say: ``tail`` is the identification part every method
    shares (``n<docs>_s<seed>``, plus the score suffix of a scored method); the rest is for the
    methods whose result they change."""

    tail: str
    seed: int
    n_masks: int
    sparsity: float
    repeat: int = 0
    of: int | None = None
    top_k: int = TOP_K
    universal_filter: bool = False  # universal.filter: greedy's rounds then leave the universal heads out
    options: object = None  # the method's MethodOptions (None: it has none)

    @property
    def repeat_suffix(self) -> str:
        """``_r<repeat>`` for a repeat after the first, else nothing: every search id ends with it."""
        return f"_r{self.repeat}" if self.repeat else ""


def budget_id(name: str, parts: SearchParts, *settings: str, sparsity: bool = True) -> str:
    """The name of a search that spends a budget of masks:
    ``<method>_m<M>[of<full>][_p<p>][_<setting>...]_<tail>[_r<repeat>]``, ``settings`` the method's
    own (each option that changes its result, e.g. ``k5``), ``sparsity`` whether it uses one.

    >>> parts = SearchParts(tail="n20_s0", seed=0, n_masks=100, sparsity=0.05, repeat=1)
    >>> budget_id("cs_stratified", parts), budget_id("gt", parts, "k5", "gauto", sparsity=False)
    ('cs_stratified_m100_p0.05_n20_s0_r1', 'gt_m100_k5_gauto_n20_s0_r1')
    """
    size = f"{parts.n_masks}of{parts.of}" if parts.of else f"{parts.n_masks}"
    fields = [f"{name}_m{size}", *([f"p{parts.sparsity:g}"] if sparsity else []), *settings, parts.tail]
    return "_".join(fields) + parts.repeat_suffix


@dataclass(frozen=True)
class Method:
    """A search method, as the workflow and the report know it.

    name: the config's spelling (``search.methods``). kind: its :class:`~headloc.methods.kinds.Kind`
        (declared by name: ``kind="masks"``).
    label: what its per-head value (``coef`` of recovery.json) means: the heatmap's colour bar.
    reading: how to read its heatmap, in reStructuredText (the caption in Snakemake's report).
    marker: its matplotlib marker in the methods figure.
    search_id: the directory name of one search from its :class:`SearchParts`.
    recover: ``recover(inputs, names, params, log) -> dict``: the ranking fields of recovery.json
        (``ranking``, ``coef``, ``n_evals``, ``alpha``, ``r2``, ``intercept`` and its own) from the
        files its search's steps left (a :class:`~headloc.methods.steps.RecoverInputs`), the head
        names and the step's parameters (a :class:`~headloc.methods.steps.RecoverParams`); None:
        its kind's (a one-job kind reads the job's result: :func:`headloc.methods.kinds.read_result`).
    algorithm: what its kind's step calls (the kind's ``algorithm`` says its signature): a mask
        design (kind masks), a gradient fit (kind gradient), a sequential search's builder (kind
        sequential), the guided search (kind guided); None for a kind that calls none.
    least_budget: kind ``sequential``, optional: ``least_budget(n_heads, top_k, options) -> (masks,
        setting, need)``: the smallest budget its search runs with on a model of ``n_heads`` heads,
        the setting it follows from ("groups of 16") and what it pays for ("to score ..."); the config
        check refuses a smaller ``search.n_masks`` before any job (the search itself refuses it
        too). None: any budget the schema allows.
    budgeted: spends ``search.n_masks`` masked evaluations (``budgets`` and ``sparsity`` apply).
    nested: a smaller budget is the first rows of the full design (one scoring serves every budget).
    repeats: random, so ``search.repeats`` draws it again (seed + repeat).
    stages: 2 for a design refined after its first stage is scored (rule refine_masks).
    rows_from: (method, sub-folder): reuse that method's rows when it runs too (one-shot greedy
        reads greedy's round 1, the same matrix).
    excludes_universal: its search leaves the universal heads out (greedy's rounds, with the
        universal filter on), so it waits on them and cannot be the main method that finds them.
    options: its :class:`~headloc.methods.settings.MethodOptions` subclass (its own config section,
        named by the method: ``chg``, ``group_testing``, ...), which holds each option's default;
        None for a method without options.
    """

    name: str
    kind: Kind
    about: str
    label: str
    reading: str
    marker: str
    search_id: Callable[[SearchParts], str]
    recover: Callable | None = None
    algorithm: Callable | None = None
    least_budget: Callable | None = None
    budgeted: bool = False
    nested: bool = False
    repeats: bool = False
    stages: int = 1
    rows_from: tuple[str, str] | None = None
    excludes_universal: bool = False
    options: type | None = None

    def __post_init__(self):
        if isinstance(self.kind, str):
            object.__setattr__(self, "kind", kind_named(self.kind))
        if self.recover is None:
            object.__setattr__(self, "recover", self.kind.recover)
        self.kind.check(self)
        if self.options is not None and self.options.SECTION != self.name:
            raise ValueError(f"method {self.name}: its options are section {self.options.SECTION!r}, expected "
                             f"its own name {self.name!r}")

    def options_of(self, given=None):
        """Its options from ``given`` (its config section, some of it, or options already built) over
        their defaults; None for a method without options (which refuses any given)."""
        if self.options is None:
            if given:
                raise ValueError(f"method {self.name!r} takes no options, got {dict(given)!r}")
            return None
        return self.options.of(given)

    @property
    def scored(self) -> bool:
        """Whether it scores masked evaluations (so a search's scoring task and metric name it): its kind's."""
        return self.kind.scored

    @property
    def random(self) -> bool:
        """Whether its result depends on the seed: a method drawn again per repeat, or of a seeded kind."""
        return self.repeats or self.kind.seeded


# ---------------------------------------------------------------- shared recovery steps


def scored_masks(masks_path, score_paths):
    """A design and its scores, checked to cover every mask once, in order."""
    from headloc.io import read_scores

    masks = np.load(masks_path)
    scores = read_scores(score_paths)
    if not np.array_equal(scores["mask"].to_numpy(), np.arange(len(masks))):
        raise ValueError(f"the chunk scores cover masks {scores['mask'].tolist()}, expected 0..{len(masks) - 1}")
    return masks, scores


def fit_masks(inputs, names, params, log, *, estimator, stability: bool) -> dict:
    """Fit ``estimator`` (a :mod:`headloc.search.recovery` estimator) to the masks and their scores
    (both stages' rows when there is a stage 2; the first ``params.nested_rows`` for a nested budget);
    ``stability`` adds the bootstrap probability of each head being in the top k."""
    import pandas as pd

    from headloc.search.evidence_record import extend_per_doc
    from headloc.search.recovery import top_k_probability  # sklearn (~1 s): only here

    masks, scores = scored_masks(inputs.masks, inputs.scores)
    per_doc = design_per_doc(inputs.samples, len(masks), params)
    if inputs.stage2_masks:
        masks2, scores2 = scored_masks(inputs.stage2_masks, inputs.stage2_scores)
        log.info("stage 1: %d masks, stage 2: %d masks", len(masks), len(masks2))
        per_doc = extend_per_doc(per_doc, len(masks), design_per_doc(inputs.stage2_samples, len(masks2), params))
        masks, scores = np.vstack([masks, masks2]), pd.concat([scores, scores2])
    rows = params.nested_rows
    if rows:  # a nested budget: the first rows of the full design
        log.info("budget %d: the first %d of %d scored masks", rows, rows, len(masks))
        masks, scores = masks[:rows], scores.iloc[:rows]
        per_doc = None if per_doc is None else per_doc[:rows]
    y = scores["score"].to_numpy()
    fit = estimator.fit(masks, y)
    log.info("alpha %.4g, R^2 %.3f", fit.alpha_, fit.r2_)
    found = {
        "n_evals": fit.n_evals_, "alpha": fit.alpha_, "r2": fit.r2_, "intercept": fit.intercept_,
        "ranking": [names[i] for i in fit.ranking_],
        "coef": {name: float(c) for name, c in zip(names, fit.coef_)},
        **fit_evidence(estimator, fit, masks, per_doc, names, params, log),
    }
    if stability:  # the Lasso's uncertainty: how often bootstrap refits keep each head in the top k
        k = params.top_k
        probability = top_k_probability(masks, y, alpha=fit.alpha_, k=k, random_state=params.seed)
        found["top_k_probability"] = {name: float(q) for name, q in zip(names, probability)}
        log.info("P(top %d): %s", k, ", ".join(f"{names[i]} {probability[i]:.2f}" for i in fit.ranking_[:k]))
    return found


def design_per_doc(samples, n_masks: int, params):
    """A design's per-document scores, oriented (None: not kept, e.g. no samples files given)."""
    from headloc.io import read_per_doc

    return read_per_doc(samples, n_masks, params.higher_is_better) if samples else None


def fit_evidence(estimator, fit, masks, per_doc, names, params, log) -> dict:
    """recovery.json's evidence fields of a fit (:mod:`headloc.search.evidence`): the fit made again
    on each resample of the documents, at the penalty it chose; a fit that measures each head (one-shot
    greedy's single-head differences) gives measured heads, a Lasso estimated ones."""
    from sklearn.base import clone

    from headloc.search.evidence import assess, log_evidence
    from headloc.search.evidence_record import baseline_row

    again = clone(estimator)
    if "alpha" in again.get_params():
        again.set_params(alpha=fit.alpha_)
    status = [getattr(estimator, "status", "estimated")] * len(names)
    found = assess(fit.coef_, status, per_doc, lambda y: again.fit(masks, y).coef_,
                   baseline_row=baseline_row(masks), top_k=params.top_k, seed=params.seed)
    log_evidence(found, names, fit.coef_, log)
    return found.fields(names, fit.coef_)


def lasso_recover(inputs, names, params, log) -> dict:
    """Eq. (1): the Lasso on the masks' scores, with its top-k stability."""
    from headloc.search.recovery import LassoRecovery

    estimator = LassoRecovery(alpha=params.alpha, random_state=params.seed)
    return fit_masks(inputs, names, params, log, estimator=estimator, stability=True)
