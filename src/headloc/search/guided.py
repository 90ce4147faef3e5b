"""Gradient-guided greedy: greedy's question asked of a short list that attribution beside the
background draws up (search method ``guided_greedy``, :mod:`headloc.methods.guided_greedy`).

Greedy ablates every head beside the heads chosen so far and adds the one that lowers the score
most: N evaluations a step. Halving groups beside them (conditional group testing) is cheap but
ranks groups by the sum of their heads' drops, and on SmolLM2's ioi margin a dozen heads each move
the score beside the background and as many raise it, so the group holding greedy's next head
drops most only about half the time (docs/results/conditional-landscape.md). Attribution beside
the background (:func:`headloc.search.attribution.attribution` with ``background``: the gradient
with the background's gates at 0) estimates every head's drop there at once, to first order, and
puts greedy's next head among its first few on that task. So each step:

1. one gradient pass at the background's gates: every other head's estimated drop beside it;
2. a short list: the ``m`` heads with the largest estimated drops, the ``m_abs`` with the largest
   estimates of either sign (a head far from linear in its gate can have a large estimate of the
   wrong sign), and the ``carry`` best runners-up of the step before, by
   the drop measured there (a head the gradient misses in every step is kept by its measurement);
3. each head of the list ablated beside the background (a masked evaluation each, none twice);
   the one that lowers the score most joins the background.

Cost: at most ``m + m_abs + carry`` evaluations and one gradient pass a step, and the unablated
score; with the defaults (``m = m_abs = 10``, ``carry = 0``) at most 20 a step, fewer where the two
lists overlap.

The workflow runs it as one job of kind ``guided`` (:mod:`headloc.methods.kinds.guided`), which
both scores masks and takes the gradients, and keeps both in a record to resume from.

>>> import numpy as np
>>> effect = np.zeros(64); effect[[3, 40, 9]] = [1.0, 0.6, 0.3]
>>> backup = lambda s: 0.5 if 3 in s and 17 in s else 0.0  # 17 counts only once 3 is ablated
>>> score = lambda sets: [1.0 - effect[list(s)].sum() - backup(set(s)) for s in sets]
>>> estimate = lambda bg: effect + (0.5 * np.eye(64)[17] if 3 in bg else 0.0)
>>> found = guided_greedy(estimate, score, 64, 3, m=2, m_abs=0, carry=1)
>>> found.heads, found.evaluations, found.gradient_passes
([3, 40, 17], 7, 3)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from headloc.search.sequential import check_positive_int


@dataclass(frozen=True)
class GuidedSteps:
    """The heads in the order chosen, each one's measured drop beside its background (``beside``;
    ``together``: heads ablated with it there, a pair's partner), ``labels`` saying how each was
    found, the masked evaluations (distinct sets scored, the unablated one included), gradient
    passes, each short list with the background it was measured beside, the drop measured for each
    head of it and the head chosen from it (None: none lowered the score enough), the unablated
    score, every head by the last gradient's estimate, largest drop first, ``details`` (lists of
    head indices by what they are, e.g. ``set_aside``) and ``probes`` (screened greedy's pair probes:
    each one's background, best pair, its drop and the drop of the steps it was weighed against,
    None where none, and whether it joined)."""

    heads: list[int]
    drops: list[float]
    evaluations: int
    gradient_passes: int
    lists: list[list[int]]
    measured: list[dict[int, float]]
    baseline: float
    last_order: list[int]
    backgrounds: list[list[int]]
    picked: list[int | None]
    beside: list[list[int]]
    together: list[list[int]]
    labels: list[str]
    details: dict = field(default_factory=dict)
    probes: list[dict] = field(default_factory=list)


class SetScores:
    """``score_sets`` with each distinct head set scored once (``count``: how many were)."""

    def __init__(self, score_sets: Callable[[list], list]):
        self.score_sets, self.known = score_sets, {}

    def __call__(self, head_sets: list) -> list[float]:
        keys = [frozenset(s) for s in head_sets]
        new = list(dict.fromkeys(key for key in keys if key not in self.known))
        if new:
            self.known.update(zip(new, (float(v) for v in self.score_sets([sorted(key) for key in new]))))
        return [self.known[key] for key in keys]

    @property
    def count(self) -> int:
        return len(self.known)


def short_list(guess, excluded, m: int, m_abs: int, extra=()) -> tuple[list[int], list[int]]:
    """A step's short list: the ``m`` heads of largest estimated drop, the ``m_abs`` of largest
    estimate of either sign and ``extra``, none of ``excluded``; and every head by estimate."""
    guess = np.asarray(guess, dtype=float).copy()
    guess[list(excluded)] = np.nan
    ranked = [int(h) for h in np.argsort(-np.nan_to_num(guess, nan=-np.inf), kind="stable")]
    magnitude = [int(h) for h in np.argsort(-np.nan_to_num(np.abs(guess), nan=-np.inf), kind="stable")]
    return [h for h in dict.fromkeys(ranked[:m] + magnitude[:m_abs] + list(extra)) if h not in excluded], ranked


def check_lists(m: int, m_abs: int) -> None:
    for name, value in (("m", m), ("m_abs", m_abs)):
        check_positive_int(name, value, least=0, meaning="heads on each step's short list")
    if m + m_abs == 0:
        raise ValueError("m and m_abs cannot both be 0: the short list would hold only the runners-up")


def guided_greedy(estimate: Callable[[list[int]], np.ndarray], score_sets: Callable[[list], list], n_heads: int,
                  k: int, *, m: int, m_abs: int, carry: int) -> GuidedSteps:
    """``k`` heads chosen greedily from short lists (module docstring); ``m``, ``m_abs`` and ``carry``
    have no default here: the method's options hold them (GuidedGreedyOptions). ``estimate(background)``:
    every head's estimated drop beside ``background`` (length ``n_heads``, larger = more damage:
    minus attribution's effects); ``score_sets(head_sets)``: each set's score when ablated
    (higher is better)."""
    check_positive_int("k", k)
    if k > n_heads:
        raise ValueError(f"k must lie in 1..{n_heads} (number of heads), got {k}")
    check_lists(m, m_abs)
    check_positive_int("carry", carry, least=0, meaning="heads on each step's short list")
    scores = SetScores(score_sets)
    background, drops, runners_up, lists, steps = [], [], {}, [], []
    for _ in range(k):
        carried = sorted(runners_up, key=lambda h: (-runners_up[h], h))[:carry]
        short, ranked = short_list(estimate(list(background)), background, m, m_abs, carried)
        lists.append(short)
        base, *scored = scores([background] + [background + [h] for h in short])
        measured = {h: base - s for h, s in zip(short, scored)}
        steps.append(measured)
        best = max(short, key=lambda h: (measured[h], -h))
        background, drops = background + [best], drops + [measured[best]]
        runners_up = {h: d for h, d in measured.items() if h != best}
    return GuidedSteps(background, drops, scores.count, k, lists, steps, scores([()])[0], ranked,
                       backgrounds=[background[:i] for i in range(k)], picked=list(background),
                       beside=[background[:i] for i in range(k)], together=[[] for _ in range(k)],
                       labels=[f"chosen {i + 1}, beside {i} heads" for i in range(k)])
