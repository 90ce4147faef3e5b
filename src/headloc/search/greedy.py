"""Greedy search (paper Table 4, "Greedy"): ``k`` rounds, each keeping the heads already chosen ablated.

Round 1 scores the unablated model and every candidate head alone (the one-shot greedy matrix);
round ``r`` scores the ``r - 1`` heads chosen so far plus each remaining candidate in turn. Each
round keeps the head whose addition gives the lowest score (ties: the lower head index). These are
pure functions: the workflow chains the rounds as file targets (``round{r}/masks.npy`` -> scores
-> ``chosen.json``).

How every search method meets the universal-head filter
-------------------------------------------------------
Universal heads (``headloc.workflow.selection.universal_heads``) sit at the top of many unrelated tasks. When
the filter is on, each method leaves them out where it *chooses* heads, so a task's top heads are
never the tail of a search that spent itself on universal heads:

* **greedy**: the universal heads are not candidates (``exclude=``): no round keeps one, and no
  round after the first ablates one, so every round picks among task heads. Round 1 still scores
  every head alone (it *is* the one-shot greedy matrix, which one-shot greedy then reuses; the
  excluded heads cost one evaluation each there). The search therefore depends on the
  universal-head detection, which comes from the main method's unfiltered rankings. In the
  ranking the excluded heads come last, in index order.
* **greedy1s** (one-shot greedy): the one-shot matrix scores every head alone (the same
  evaluations serve the unfiltered ranking); its ranking is then filtered
  (:func:`filter_ranking`: universal heads moved to the end). Single-head scores do not interact,
  so this equals excluding them from the search.
* **cs_bernoulli / cs_stratified** (compressed sensing): the masks and the Lasso cover every head
  (the heads interact in the fit); the recovered ranking is filtered after recovery.
* **chg** and **attribution**: the gates of every head are fitted or differentiated together;
  the ranking is filtered afterwards, as for compressed sensing.

Unfiltered rankings (``exclude=()``) are always available for the unfiltered rows of Table 4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def _excluded(n_heads: int, exclude: Iterable[int]) -> set[int]:
    excluded = {int(h) for h in exclude}
    outside = sorted(h for h in excluded if not 0 <= h < n_heads)
    if outside:
        raise ValueError(f"excluded heads {outside} are outside the model's {n_heads} heads (0..{n_heads - 1})")
    return excluded


def candidates(n_heads: int, chosen: Sequence[int], exclude: Iterable[int] = ()) -> list[int]:
    """Heads a round may add: all heads neither chosen yet nor excluded, in index order."""
    excluded = _excluded(n_heads, exclude)
    clash = sorted(excluded & {int(h) for h in chosen})
    if clash:
        raise ValueError(f"heads {clash} are both chosen and excluded; an excluded head is never a candidate")
    taken = set(chosen) | excluded
    remaining = [head for head in range(n_heads) if head not in taken]
    if not remaining:
        raise ValueError(f"no candidate heads left: {len(set(chosen))} chosen and {len(excluded)} excluded "
                         f"of {n_heads}")
    return remaining


def round_masks(n_heads: int, chosen: Sequence[int], exclude: Iterable[int] = ()) -> np.ndarray:
    """The masks of the round after ``chosen`` (flat head indices), one row per candidate head.

    Round 1 is the one-shot matrix: the all-zero (unablated) row, then every head alone, excluded
    heads included (they are never *chosen*). Later rounds never ablate a head in ``exclude``.

    >>> round_masks(3, []).tolist()
    [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    >>> round_masks(3, [1]).tolist()
    [[1, 1, 0], [0, 1, 1]]
    >>> round_masks(3, [], exclude=[0]).tolist()
    [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    >>> round_masks(3, [1], exclude=[0]).tolist()
    [[0, 1, 1]]
    """
    candidates(n_heads, chosen, exclude)  # checks the heads, and that one is left to choose
    added = candidates(n_heads, chosen, exclude if chosen else ())
    masks = np.zeros((len(added), n_heads), dtype=np.int8)
    masks[:, list(chosen)] = 1
    masks[np.arange(len(added)), added] = 1
    if not chosen:
        masks = np.vstack([np.zeros(n_heads, dtype=np.int8), masks])
    return masks


def choose(masks: np.ndarray, scores: np.ndarray, chosen: Sequence[int],
           exclude: Iterable[int] = ()) -> tuple[int, np.ndarray]:
    """The head this round adds and every candidate's score (NaN for heads chosen or excluded).

    ``masks`` and ``scores`` are one round's rows (as made by :func:`round_masks` with the same
    ``exclude``).

    >>> masks = round_masks(3, [])
    >>> choose(masks, np.array([0.9, 0.8, 0.2, 0.5]), [])
    (1, array([0.8, 0.2, 0.5]))
    """
    masks, scores = np.asarray(masks), np.asarray(scores, dtype=float)
    n_heads = masks.shape[1]
    exclude = sorted(_excluded(n_heads, exclude))
    if not np.array_equal(masks, round_masks(n_heads, chosen, exclude)):
        excluding = f" excluding heads {exclude}" if exclude else ""
        raise ValueError(f"the masks are not the greedy round after heads {list(chosen)}{excluding}")
    rows = scores[1:] if not chosen else scores
    by_head = np.full(n_heads, np.nan)
    by_head[candidates(n_heads, chosen, exclude if chosen else ())] = rows
    by_head[exclude] = np.nan  # scored alone in round 1, but never chosen
    best = int(np.nanargmin(by_head))  # the first minimum: ties go to the lower index
    return best, by_head


def ranking(chosen: Sequence[int], last_scores: np.ndarray, exclude: Iterable[int] = ()) -> list[int]:
    """Chosen heads in order, then the rest by their score in the last round (most damaging first),
    then the excluded heads in index order (they were never scored)."""
    last_scores = np.asarray(last_scores, dtype=float)
    excluded = _excluded(len(last_scores), exclude)
    taken = set(chosen)
    rest = [int(h) for h in np.argsort(last_scores, kind="stable")
            if h not in taken and h not in excluded and not np.isnan(last_scores[h])]
    return [*chosen, *rest, *sorted(excluded)]


def filter_ranking(ranking: Sequence, exclude: Iterable) -> list:
    """``ranking`` with the heads in ``exclude`` moved to the end, both parts in their order.

    The universal filter of methods that rank every head (greedy1s, compressed sensing, chg,
    attribution); works on flat indices and on head names alike.

    >>> filter_ranking(["L1H2", "L3H0", "L0H1", "L4H4"], exclude=["L0H1", "L1H2"])
    ['L3H0', 'L4H4', 'L1H2', 'L0H1']
    """
    excluded = set(exclude)
    return [h for h in ranking if h not in excluded] + [h for h in ranking if h in excluded]
