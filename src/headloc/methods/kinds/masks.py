"""Kind ``masks``: a design of masks, each scored on the identification subset, ranked by a fit of
the scores (eq. (1)'s Lasso, one-shot greedy's single-head effects).

Steps, in the rules' order: :func:`design` (rule make_masks), the scoring (rule score_masks); with
``stages=2`` then :func:`refine` (rule refine_masks) and stage 2's scoring (rule
score_stage2_masks); then the recovery (rule recover_heads). Its methods supply their design
(``algorithm``). :func:`make_masks` is the design step without its files.

>>> phi = make_masks(20, 8, method="cs_stratified", sparsity=0.1, random_state=0)
>>> phi.shape, phi.sum(axis=1).tolist()
((8, 20), [2, 2, 2, 2, 2, 2, 2, 2])
>>> int(phi.sum(axis=0).max() - phi.sum(axis=0).min())
1
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import save_npy, write_json
from headloc.methods.contract import scored_masks
from headloc.methods.kinds import Kind, SearchFiles
from headloc.methods.registry import get, registry
from headloc.methods.steps import RecoverInputs, RecoverParams

LASSO_LEAST = 2  # masks a Lasso needs: one mask's score is all intercept, and cross-validation needs two


@dataclass(frozen=True)
class DesignParams:
    """Rule make_masks: the design's method, n_masks (a two-stage method's whole budget: its design is
    stage 1's share), share of heads ablated per mask, and seed."""

    method: str
    n_masks: int
    sparsity: float
    seed: int

    @classmethod
    def of(cls, search) -> DesignParams:
        s = search.settings
        return cls(search.method.name, s.n_masks, s.sparsity, s.seed)


@dataclass(frozen=True)
class RefineParams:
    """Rule refine_masks: a two-stage design's whole n_masks (stage 2 spends what stage 1 left), the
    top k whose stability decides, the Lasso penalty and the seed."""

    n_masks: int
    top_k: int
    alpha: float | str
    seed: int

    @classmethod
    def of(cls, search) -> RefineParams:
        s = search.settings
        return cls(s.n_masks, s.top_k, s.alpha, s.seed)


class Masks(Kind):
    name = "masks"
    algorithm = "design(n_heads, n_masks, sparsity, rng) -> (M, N) int8 masks, 1 = ablated"
    scored = True
    fixed_design = True
    chunked = True
    steps = {"design": DesignParams, "refine": RefineParams, "recover": RecoverParams}

    def least_masks(self, method) -> tuple[int, str]:
        if method.stages == 2:
            from headloc.search.adaptive import stage_sizes

            least = next(n for n in range(LASSO_LEAST, 100) if stage_sizes(n)[0] >= LASSO_LEAST)
            first, second = stage_sizes(least)
            return least, (f"its first stage's Lasso needs {LASSO_LEAST} masks and its second stage at least one: "
                           f"{least} masks split {first} + {second}")
        return LASSO_LEAST, ("its Lasso fits the differences between masks' scores: one mask's score is all "
                             "intercept, and cross-validating the penalty needs two")

    def recovery_inputs(self, files: SearchFiles, search, model=()) -> RecoverInputs:
        """The design's masks, scores and per-document samples; both stages' for a two-stage method."""
        found = RecoverInputs(masks=files.masks(), scores=files.scores(), samples=files.all_samples())
        if search.method.stages == 2:
            found = RecoverInputs(masks=found.masks, scores=found.scores, samples=found.samples,
                                  stage2_masks=files.masks("stage2"), stage2_scores=files.scores("stage2"),
                                  stage2_samples=files.all_samples("stage2"))
        return found

    def drive(self, search, job) -> RecoverInputs:
        files = job.files
        job.scored(design(self.params("design", search), job.geometry, files.masks(), job.log))
        if search.method.stages == 2:
            stage2 = refine(self.params("refine", search), job.geometry, files.masks(), files.scores(),
                            masks_out=files.masks("stage2"), plan_out=files.refinement(), log=job.log)
            job.scored(stage2, "stage2")
        return self.recovery_inputs(files, search)


def make_masks(n_heads: int, n_masks: int | None = None, *, method: str = "cs_stratified",
               sparsity: float | None = None, random_state: int | None = 0) -> np.ndarray:
    """The measurement matrix of a search: ``(M, N)`` int8, 1 = ablated, a pure function of its
    arguments (the same ``random_state``, the same matrix).

    ``n_masks`` and ``sparsity`` are checked for a method that spends a budget (a two-stage
    method's matrix is its stage 1: the screen's share of the budget); one-shot greedy's is the zero
    row and the identity whatever they are.
    """
    spec = get(method)
    if not spec.kind.fixed_design:
        designed = [name for name, other in registry().items() if other.kind.fixed_design]
        raise ValueError(f"search method {method!r} ({spec.kind.name}) has no mask design; "
                         f"expected one of {', '.join(designed)}")
    if spec.budgeted:
        if n_masks is None or n_masks < 1:
            raise ValueError(f"n_masks must be a positive integer for {method}, got {n_masks!r}")
        if sparsity is None or not 0 < sparsity < 1:
            raise ValueError(f"sparsity must lie in (0, 1) for {method}, got {sparsity!r}")
    if spec.stages == 2:
        from headloc.search.adaptive import stage_sizes  # sklearn: not at registry import

        n_masks = stage_sizes(n_masks)[0]
    return spec.algorithm(n_heads, n_masks, sparsity, np.random.default_rng(random_state))


def design(params: DesignParams, geometry: HeadGeometry, masks_out, log) -> np.ndarray:
    """Rule make_masks: the design's masks, written to ``masks_out``."""
    masks = make_masks(geometry.total, params.n_masks, method=params.method, sparsity=params.sparsity,
                       random_state=params.seed)
    log.info("%s: %d masks over %d heads (%d x %d), %.1f heads ablated per mask", params.method, len(masks),
             geometry.total, geometry.n_layers, geometry.n_heads, masks.sum(1).mean())
    save_npy(masks_out, masks)
    return masks


def refine(params: RefineParams, geometry: HeadGeometry, masks: str, scores: Sequence[str], *, masks_out,
           plan_out, log) -> np.ndarray:
    """Rule refine_masks: fit stage 1 (``masks`` and their ``scores``), stop if its top k is settled,
    else design stage 2's masks over the uncertain candidates (:func:`headloc.search.adaptive.refine`).
    Writes stage 2's masks (no rows when settled) to ``masks_out`` and the decision to ``plan_out``."""
    from headloc.search.adaptive import refine as refine_design, stage_sizes

    names, k = geometry.names, params.top_k
    stage1, table = scored_masks(masks, scores)
    plan = refine_design(stage1, table["score"].to_numpy(), k=k, n_rows=stage_sizes(params.n_masks)[1],
                         alpha=params.alpha, random_state=params.seed)
    top = np.argsort(-plan.probability, stable=True)[:k]
    log.info("stage 1: %d masks, P(top %d) of its most likely heads: %s; %s", len(stage1), k,
             ", ".join(f"{names[i]} {plan.probability[i]:.2f}" for i in top),
             "settled: no stage 2" if plan.settled else f"stage 2: {len(plan.masks)} masks over "
                                                        f"{len(plan.candidates)} candidates")
    save_npy(masks_out, plan.masks)
    write_json(plan_out, {
        "stage1_masks": int(len(stage1)), "stage2_masks": int(len(plan.masks)), "settled": plan.settled,
        "alpha": plan.alpha, "candidates": [names[i] for i in plan.candidates],
        "top_k_probability": {name: float(q) for name, q in zip(names, plan.probability)},
    })
    return plan.masks
