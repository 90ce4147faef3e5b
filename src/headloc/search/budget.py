"""How many masks a compressed-sensing search needs to find k heads among N: the budget advice
measured on the certified planted family (docs/ground-truth.md, "Budget advice").

Compressed sensing needs on the order of k log(N / k) measurements to recover k of N
coefficients. On the certified planted models of 32, 270 and 1,024 heads (benchmarks/ground_truth.py,
the gold answer's log-probability as the score, 3 placements x 3 seeds, budgets 50, 100 and 200),
the smallest budget at which cs_stratified's or cs_adaptive's top k held 95 % of a task's role
heads (mean over placements and seeds) grew like that, with k the task's planted heads.
``PER_K_LOG_N`` is the largest ratio measured (9.02: cs_stratified on c32's copy1, 50 masks for 2
of 32 heads), rounded up, so no certified task needed more. The budgets measured are coarse (the
true 95 % point lies between a measured budget and the one below), so the advice errs high.
Sequential searches stop by themselves (group testing with its two extra heads: about 40-46
evaluations at 270-1,024 heads), so for them ``search.n_masks`` is a cap, not this advice (the
workflow's parse-time note is for mask designs only); a cap too small for group testing to score
one partition is refused instead (:func:`headloc.search.group_testing.partition_budget`).

>>> suggested_masks(270, 5)
190
>>> suggested_masks(32, 5) < suggested_masks(270, 5) < suggested_masks(1024, 5)
True
"""

from __future__ import annotations

import math

# masks / (k ln(N / k)) at 95 % recall, the largest over the certified tasks (docs/ground-truth.md)
PER_K_LOG_N = 9.5


def suggested_masks(n_heads: int, k: int) -> int:
    """Masks for 95 % recall of ``k`` heads among ``n_heads`` on the certified planted family, rounded up.

    ``k`` is clipped to 1..n_heads/2 (below 1 there is nothing to find; above N/2 the log term
    would shrink while the task grows).
    """
    if n_heads < 2:
        raise ValueError(f"n_heads must be at least 2, got {n_heads}")
    k = min(max(k, 1), n_heads / 2)
    return math.ceil(PER_K_LOG_N * k * math.log(n_heads / k))
