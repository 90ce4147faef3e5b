"""How many masks a compressed-sensing search needs to find k heads among N: the budget advice
measured on the planted-head family (docs/ground-truth.md, "Budget advice").

Compressed sensing needs on the order of k log(N / k) measurements to recover k of N
coefficients. On the planted models of 32 and 270 heads (benchmarks/ground_truth.py, the gold
answer's log-probability as the score), the smallest budget at which the best mask design's top k
held 95 % of a task's k planted heads (mean over seeds) grew like that. ``PER_K_LOG_N`` is the
largest ratio measured (10.19: smol's copy1 task, 100 masks for 2 of 270 heads, 5 seeds), rounded up, so
no planted task that a design found needed more. (On the 1,024-head model no design reached 95 %
of any planted set: docs/ground-truth.md says why.)

>>> suggested_masks(270, 5)
210
>>> suggested_masks(32, 5) < suggested_masks(270, 5) < suggested_masks(1024, 5)
True
"""

from __future__ import annotations

import math

# masks / (k ln(N / k)) at 95 % recall, the largest over the planted tasks (docs/ground-truth.md)
PER_K_LOG_N = 10.5


def suggested_masks(n_heads: int, k: int) -> int:
    """Masks for 95 % recall of ``k`` heads among ``n_heads`` on the planted family, rounded up.

    ``k`` is clipped to 1..n_heads/2 (below 1 there is nothing to find; above N/2 the log term
    would shrink while the task grows).
    """
    if n_heads < 2:
        raise ValueError(f"n_heads must be at least 2, got {n_heads}")
    k = min(max(k, 1), n_heads / 2)
    return math.ceil(PER_K_LOG_N * k * math.log(n_heads / k))
