"""Greedy search (paper Table 4, "Greedy"): ``k`` rounds, each keeping the heads already chosen ablated.

Round 1 scores the unablated model and every head alone (the one-shot greedy matrix); round ``r``
scores the ``r - 1`` heads chosen so far plus each remaining head in turn. Each round keeps the head
whose addition gives the lowest score (ties: the lower head index). These are pure functions: the
workflow chains the rounds as file targets (``round{r}/masks.npy`` -> scores -> ``chosen.json``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def round_masks(n_heads: int, chosen: Sequence[int]) -> np.ndarray:
    """The masks of the round after ``chosen`` (flat head indices), one row per candidate head.

    >>> round_masks(3, []).tolist()
    [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    >>> round_masks(3, [1]).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    if not chosen:
        return np.vstack([np.zeros(n_heads, dtype=np.int8), np.eye(n_heads, dtype=np.int8)])
    added = candidates(n_heads, chosen)
    masks = np.zeros((len(added), n_heads), dtype=np.int8)
    masks[:, list(chosen)] = 1
    masks[np.arange(len(added)), added] = 1
    return masks


def candidates(n_heads: int, chosen: Sequence[int]) -> list[int]:
    """Heads a round may add: all heads not chosen yet, in index order."""
    taken = set(chosen)
    return [head for head in range(n_heads) if head not in taken]


def choose(masks: np.ndarray, scores: np.ndarray, chosen: Sequence[int]) -> tuple[int, np.ndarray]:
    """The head this round adds and every candidate's score (NaN for heads already chosen).

    ``masks`` and ``scores`` are one round's rows (as made by :func:`round_masks`).

    >>> masks = round_masks(3, [])
    >>> choose(masks, np.array([0.9, 0.8, 0.2, 0.5]), [])
    (1, array([0.8, 0.2, 0.5]))
    """
    masks, scores = np.asarray(masks), np.asarray(scores, dtype=float)
    n_heads = masks.shape[1]
    if not np.array_equal(masks, round_masks(n_heads, chosen)):
        raise ValueError(f"the masks are not the greedy round after heads {list(chosen)}")
    rows = scores[1:] if not chosen else scores
    by_head = np.full(n_heads, np.nan)
    by_head[candidates(n_heads, chosen)] = rows
    best = int(np.nanargmin(by_head))  # the first minimum: ties go to the lower index
    return best, by_head


def ranking(chosen: Sequence[int], last_scores: np.ndarray) -> list[int]:
    """Chosen heads in order, then the rest by their score in the last round (most damaging first)."""
    taken = set(chosen)
    rest = [int(h) for h in np.argsort(last_scores, kind="stable")
            if h not in taken and not np.isnan(last_scores[h])]
    return [*chosen, *rest]
