"""Measurement matrices: which heads each evaluation ablates (paper section 4).

A measurement matrix ``Phi`` has shape ``(n_masks, n_heads)`` with ``Phi[i, j] = 1`` when head ``j``
is ablated in evaluation ``i``. All constructions are pure functions of their arguments: the same
``random_state`` gives the same matrix, and no global random state is touched.
"""

from __future__ import annotations

import numpy as np


def bernoulli_masks(n_heads: int, n_masks: int, sparsity: float, rng: np.random.Generator) -> np.ndarray:
    """Each entry i.i.d. Bernoulli(sparsity): the textbook compressed-sensing matrix."""
    return (rng.random((n_masks, n_heads)) < sparsity).astype(np.int8)


def stratified_masks(n_heads: int, n_masks: int, sparsity: float, rng: np.random.Generator) -> np.ndarray:
    """Every head ablated an almost equal number of times (column sums differ by at most one).

    The matrix holds ``round(sparsity * n_masks * n_heads)`` ones. They are dealt out as a
    sequence of random permutations of the heads, cut into rows, so column sums are balanced
    exactly; each row then receives about ``sparsity * n_heads`` ablated heads. A head that would
    appear twice in one row is swapped with a head from a later row, which keeps both balances.
    """
    per_row = max(1, round(sparsity * n_heads))
    total = per_row * n_masks
    n_rounds = -(-total // n_heads)
    stream = np.concatenate([rng.permutation(n_heads) for _ in range(n_rounds)])[:total]
    rows = stream.reshape(n_masks, per_row)
    rows = _remove_repeats(rows, rng)
    phi = np.zeros((n_masks, n_heads), dtype=np.int8)
    np.put_along_axis(phi, rows, 1, axis=1)
    return phi


def _remove_repeats(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Swap entries between rows until no row names a head twice (keeps every head's count)."""
    rows = rows.copy()
    n_masks, per_row = rows.shape
    for i in range(n_masks):
        for slot in range(per_row):
            if np.count_nonzero(rows[i] == rows[i, slot]) == 1:
                continue
            for j in rng.permutation(n_masks):
                if j == i:
                    continue
                candidates = [
                    k for k in range(per_row)
                    if rows[j, k] not in rows[i] and rows[i, slot] not in rows[j]
                ]
                if candidates:
                    k = candidates[0]
                    rows[i, slot], rows[j, k] = rows[j, k], rows[i, slot]
                    break
    return rows


def single_head_masks(n_heads: int) -> np.ndarray:
    """One-shot greedy: a baseline row of zeros, then one row per head with only that head ablated.

    The leading unablated row is the reference every single-head score is compared with.
    """
    return np.vstack([np.zeros((1, n_heads), dtype=np.int8), np.eye(n_heads, dtype=np.int8)])
