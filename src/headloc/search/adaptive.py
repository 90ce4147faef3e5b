"""Two-stage (adaptive) compressed sensing: screen every head, then spend the rest of the budget
on the heads the screen left uncertain (search method ``cs_adaptive``).

Stage 1 spends 70 % of the budget on a stratified design over all heads (as ``cs_stratified``) and
fits the Lasso. How settled its top k is comes from :func:`headloc.search.recovery.top_k_probability`
(bootstrap refits at the chosen penalty). If every head of the stage-1 top k stays there in at
least ``settled`` of the refits, the search stops: stage 2 is empty and the budget is not spent.
Otherwise stage 2 scores masks over the ``n_candidates`` heads most likely to be in the top k
only (each ablated in a ``candidate_rate`` share of the rows, the other heads left intact): the
candidates are compared with each other without the noise of 250 other heads being switched on and
off, and few enough are ablated at once that the score does not sit at its floor. The final
ranking is the Lasso on both stages' rows.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> truth = np.zeros(60); truth[[4, 9, 30]] = [-0.4, -0.3, -0.2]
>>> phi1 = stage1_masks(60, 40, sparsity=0.1, random_state=0)
>>> y1 = 0.9 + phi1 @ truth + 0.02 * rng.standard_normal(40)
>>> plan = refine(phi1, y1, k=3, n_rows=20, random_state=0)
>>> sorted(set([4, 9, 30]) & set(plan.candidates)), len(plan.candidates), plan.masks.shape
([4, 9, 30], 24, (20, 60))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headloc.search.masks import stratified_masks
from headloc.search.recovery import LassoRecovery, top_k_probability

SETTLED = 0.9  # stop after stage 1 when each top-k head keeps its place in 90 % of the refits
STAGE1_SHARE = 0.7  # of the budget; the split, candidates and rate were chosen on planted models
CANDIDATE_FACTOR = 8  # stage 2 compares the 8k heads most likely to be in the top k
CANDIDATE_RATE = 0.2  # each candidate is ablated in a fifth of the stage-2 rows


def stage_sizes(n_masks: int) -> tuple[int, int]:
    """The budget split: stage 1 70 % (rounded up), stage 2 at most the rest.

    >>> stage_sizes(25), stage_sizes(100)
    ((18, 7), (70, 30))
    """
    if n_masks < 2:
        raise ValueError(f"cs_adaptive needs a budget of at least 2 masks (one per stage), got {n_masks}")
    first = min(n_masks - 1, -(-n_masks * 7 // 10))
    return first, n_masks - first


def stage1_masks(n_heads: int, n_rows: int, *, sparsity: float, random_state=0) -> np.ndarray:
    """Stage 1: a stratified design over every head."""
    return stratified_masks(n_heads, n_rows, sparsity, np.random.default_rng(random_state))


@dataclass(frozen=True)
class Refinement:
    """What stage 1 decided: the stage-2 masks (no rows when settled), the candidates and why."""

    masks: np.ndarray
    candidates: list[int]
    probability: np.ndarray  # each head's share of refits keeping it in the stage-1 top k
    settled: bool
    alpha: float


def refine(phi1, y1, *, k: int, n_rows: int, alpha="cv", settled: float = SETTLED,
           n_candidates: int | None = None, candidate_rate: float = CANDIDATE_RATE,
           random_state=0) -> Refinement:
    """Fit stage 1 and design stage 2 (see the module docstring)."""
    phi1, y1 = np.asarray(phi1), np.asarray(y1, dtype=float)
    n_heads = phi1.shape[1]
    if not 0 < candidate_rate < 1:
        raise ValueError(f"candidate_rate must lie in (0, 1), got {candidate_rate!r}")
    fit = LassoRecovery(alpha=alpha, random_state=random_state).fit(phi1, y1)
    probability = top_k_probability(phi1, y1, alpha=fit.alpha_, k=k, random_state=random_state)
    top = fit.ranking_[:k]
    n_candidates = min(n_heads, n_candidates or CANDIDATE_FACTOR * k)
    # most likely in the top k first; the stage-1 ranking breaks ties (e.g. heads never in it)
    place = np.argsort(fit.ranking_)  # each head's place in the stage-1 ranking
    order = np.lexsort((place, -probability))
    candidates = sorted(order[:n_candidates].tolist())
    if bool(np.all(probability[top] >= settled)) or n_rows == 0:
        return Refinement(np.zeros((0, n_heads), dtype=np.int8), candidates, probability, True, fit.alpha_)
    local = stratified_masks(len(candidates), n_rows, candidate_rate, np.random.default_rng(random_state + 1))
    masks = np.zeros((n_rows, n_heads), dtype=np.int8)
    masks[:, candidates] = local
    return Refinement(masks, candidates, probability, False, fit.alpha_)
