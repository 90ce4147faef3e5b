"""Screened greedy: greedy's heads, heads at the score's floor, backup heads, synergy and redundant
pairs in one search (search method ``screened_greedy``, :mod:`headloc.methods.screened_greedy`).

Gradient-guided greedy (:mod:`headloc.search.guided`) lists each step's candidates by a gradient,
so it cannot see a head whose effect is far from linear in its gate: it never listed the
universal head of the planted models (ablated alone, it takes every task to chance), nor the
head that alone hurt most on a task built outside the project. Each of its heads is chosen beside
the heads before it, so beside a head that took the score to its floor nothing moves, and it
cannot see a redundant pair (either head alone changes nothing). Group testing sees both kinds
of alone effect but answers greedy's question (beside the heads chosen) poorly. So, in stages:

1. **Screen** (group testing, :class:`~headloc.search.group_testing.GroupTesting`): a random
   partition of the heads, each group ablated, the most damaging halved down to single heads,
   until ``screen`` heads are confirmed alone. A confirmed head beside which the most damaging
   other one keeps less than a fifth (``1 - FLOOR``) of its drop alone takes the score to its
   floor (one mask each, as conditional group testing checks its background; where no other
   lowers the score, a head whose drop alone is ``FLOOR`` of the span, the unablated score less the
   lowest seen). One mask cannot see a partner that hurts only beside the head (on SmolLM2's
   antonyms, L0H7 beside L0H4), so the first such head, where they are fewer than ``k``, is checked
   by a step beside it of the ``floor_check`` heads of largest estimated drop: if one lowers the
   score by a fifth of the head's own drop, the head is not at the floor and the two start the
   background. Otherwise it is **set aside** (reported first, as found, and never ablated in what
   follows, since beside it nothing else could show), and the most damaging other head confirmed
   starts the background: greedy's first head, found without a gradient.
2. **Greedy steps** (as guided greedy's): a gradient beside the background lists the ``m`` heads
   of largest estimated drop, the ``m_abs`` of largest estimate of either sign and the screen's
   other confirmed heads; each is ablated beside the background and the one that lowers the score
   most joins it, while its drop is at least ``NOISE`` (0.05) of the span (the unablated score
   less the lowest score seen). Where the ``m`` heads of largest estimated drop all raise the score
   the estimate misleads there (far from the unablated model a first-order estimate can rank the
   heads that raise the score most first): the next ``m`` down its order are measured, up to
   ``deepen`` times, until one lowers the score.
3. **Pairs**: a pair that acts only together (a redundant pair: either head alone changes
   nothing) shows in no step beside chosen heads, however many steps find. So right after the
   first head, and again when a step finds no head, a pair probe: the heads not yet chosen or set
   aside are split at random into two halves and a gradient taken beside the background with each
   half ablated. A redundant pair shows in one of them whatever the split: with both heads in a
   half, restoring either restores the task (a gradient at gate 0); with one in each, the other
   half's gradient shows the head whose partner is gone. The ``pair_candidates`` heads of largest
   estimate (either sign) beside the background or either half are ablated two by two beside it
   (beside the background too: a redundant head's gradient there can be large although its
   ablation alone changes nothing). Beside the first head the best pair is weighed against the
   greedy steps it would replace: a step, and a second while the first has not lowered the score
   as much as the pair; the pair joins if it lowers the score more than the steps' heads together
   by ``NOISE`` of the span (their steps stay as measured, the heads named ``displaced``), else the
   steps' heads join (on SmolLM2's plural L2H0 and L1H3 together cost 12.95 nats, each alone less
   than 0.35). After a step that finds nothing the best pair joins if its drop is at least ``NOISE``
   of the span, and the greedy steps go on. Each half's ``probe_leads`` heads of largest estimated
   drop join every later step's short list: beside half the heads ablated a head shows that hurts
   only beside much damage, which the gradient beside the background ranks far down (on SmolLM2's
   comparative greedy's third head, L1H0, ranked 89th there and 2nd beside a half). Where that
   probe's pair does not join, the step that found nothing is taken again with the leads it did
   not list (only they are measured): no later step would list them.

It stops at ``k`` heads (the set-aside heads count), or when neither a step nor the pair probe
finds a head that lowers the score; then greedy's steps go on without the threshold until the top
``k`` is full (``below_noise``: ranked after the heads found, never among them). Measured on the
planted interaction models and SmolLM2 in docs/results/screened-greedy.md, docs/results/five-percent.md
and docs/results/below-noise.md.

>>> import numpy as np
>>> effect = np.zeros(64); effect[[5, 40]] = [0.6, 0.3]
>>> def score(sets):  # head 9 takes the score to its floor (-1); 20 and 33 matter only together
...     return [-1.0 if 9 in s else 1.0 - effect[list(s)].sum() - (0.5 if {20, 33} <= set(s) else 0.0)
...             for s in sets]
>>> def estimate(background):  # first order: each head's drop beside the background, gate at 0 or 1
...     drop = effect.copy()
...     drop[20] = 0.5 if 33 in background or 20 in background and 33 not in background else 0.0
...     drop[33] = 0.5 if 20 in background or 33 in background and 20 not in background else 0.0
...     return drop
>>> found = screened_greedy(estimate, score, 64, 5, seed=0, m=2, m_abs=0, screen=3, pair_candidates=4,
...                         probe_leads=2, floor_check=3, deepen=3)
>>> found.heads, found.details["set_aside"], found.details["pair"], found.details["displaced"]
([9, 5, 20, 33, 40], [9], [20, 33], [40])
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from headloc.search.group_testing import GroupTesting
from headloc.search.guided import GuidedSteps, SetScores, check_lists
from headloc.search.screened_steps import Steps, below_noise, greedy_step, pair_or_steps, probe_after_stop
from headloc.search.sequential import check_positive_int

FLOOR = 0.8  # beside a head at the floor, another head keeps less than 1 - FLOOR of its drop alone
NOISE = 0.05  # a head (or pair) joins only if its drop is at least this share of the span


def screened_greedy(estimate: Callable[[list[int]], np.ndarray], score_sets: Callable[[list], list], n_heads: int,
                    k: int, *, seed: int, m: int, m_abs: int, screen: int, pair_candidates: int,
                    probe_leads: int, floor_check: int, deepen: int) -> GuidedSteps:
    """Up to ``k`` heads by the stages of the module docstring. ``estimate(background)``: every
    head's estimated drop beside ``background`` (larger = more damage); ``score_sets(head_sets)``:
    each set's score when ablated (higher is better); ``seed``: the partition and the halves. No
    option has a default here: the method's options hold them (ScreenedGreedyOptions)."""
    check_positive_int("k", k)
    if k > n_heads:
        raise ValueError(f"k must lie in 1..{n_heads} (number of heads), got {k}")
    check_lists(m, m_abs)
    check_positive_int("screen", screen, meaning="heads the screen confirms alone")
    check_positive_int("pair_candidates", pair_candidates, least=0, meaning="heads the pair probe tries two by two")
    check_positive_int("probe_leads", probe_leads, least=0, meaning="heads each half of the pair probe lists")
    check_positive_int("floor_check", floor_check, least=0, meaning="heads measured beside a head at the floor")
    check_positive_int("deepen", deepen, least=0, meaning="batches of m heads a step measures further down")
    scores = SetScores(score_sets)
    steps = Steps(scores, deepen)
    alone, span, steps.last_order = screen_alone(scores, n_heads, min(k, screen), seed)
    floor = [h for h in alone if at_floor(scores, alone, h, span)]
    for head in floor:
        steps.choose(head, alone[head], [], "alone: at the score's floor, set aside")
    background = check_floor(steps, estimate, floor, alone, k, floor_check, NOISE * span)
    set_aside = [h for h in floor if h not in background]
    others = [h for h in alone if h not in floor and alone[h] >= NOISE * span]  # a step leaves out its background
    if others and not background and len(steps.heads) < k:
        steps.choose(others[0], alone[others[0]], [], "chosen 1, alone (the screen)")
        background = [others.pop(0)]
    early = late = pair_candidates >= 2
    while len(steps.heads) < k:
        if early and background and len(steps.heads) + 2 <= k:
            early = False  # once, beside the first head
            joined = pair_or_steps(steps, estimate, background, set_aside, others, m, m_abs, NOISE * span, n_heads,
                                   pair_candidates, probe_leads, seed)
        else:
            head = None if steps.stopped(background) else greedy_step(steps, estimate, background, set_aside, others,
                                                                     m, m_abs, NOISE * span)
            joined = [] if head is None else [head]
            if not joined and late and len(steps.heads) + 2 <= k:
                late = False
                joined = probe_after_stop(steps, estimate, background, set_aside, others, m, m_abs, NOISE * span,
                                          n_heads, pair_candidates, probe_leads, seed)
        if not joined:  # neither a step nor a pair lowers the score
            break
        background += joined
        others = [h for h in others if h not in joined]
    below = below_noise(steps, estimate, background, set_aside, others, m, m_abs, k)
    details = {"set_aside": set_aside, "screened": list(alone), "displaced": steps.displaced,
               "pair": [h for h, extra in zip(steps.heads, steps.together) if extra], "below_noise": below}
    return steps.result(details)


def screen_alone(scores: SetScores, n_heads: int, wanted: int, seed: int) -> tuple[dict[int, float], float, list[int]]:
    """Stage 1: the heads group testing confirms alone (head -> drop, most damaging first), the
    span (the unablated score less the lowest score seen) and every head in group testing's order
    (the ranking's tail until a gradient is taken)."""
    search = GroupTesting(n_heads=n_heads, n_masks=2 * n_heads + 2, seed=seed, k=wanted, extra_heads=0)
    masks, values, found = search.complete(lambda rows: np.array(scores([np.flatnonzero(r) for r in rows])))
    baseline = scores([()])[0]
    alone = {int(h): baseline - scores([(int(h),)])[0] for h in found.confirmed or ()}
    order = [int(h) for h in found.ranking]
    return dict(sorted(alone.items(), key=lambda item: -item[1])), baseline - float(np.min(values)), order


def at_floor(scores: SetScores, alone: dict[int, float], head: int, span: float) -> bool:
    """Whether ``head`` takes the score to its floor: the most damaging other head the screen
    confirmed, ablated beside it, adds less than ``1 - FLOOR`` of its own drop alone (one mask).
    Where no other confirmed head lowers the score by ``NOISE`` of the span, nothing can show the
    floor that way: then a head whose drop alone is at least ``FLOOR`` of the span is taken to sit
    there (beside it nothing else alone would show either)."""
    other = next((h for h in alone if h != head and alone[h] >= NOISE * span), None)
    if other is None:
        return alone[head] >= FLOOR * span
    both = scores([()])[0] - scores([(head, other)])[0]
    return both - alone[head] < (1 - FLOOR) * alone[other]


def check_floor(steps: Steps, estimate, floor: list[int], alone: dict[int, float], k: int, heads: int,
                noise: float) -> list[int]:
    """The background the steps start from, given the heads ``at_floor`` says sit at the floor
    (already chosen as set aside): where fewer than ``k``, the first is checked by a step of
    ``heads`` heads (the largest estimated drops beside it; 0: no check). One whose drop beside it
    is at least ``1 - FLOOR`` of the head's own drop alone (and ``noise``) shows the head is not at
    the floor (on a real task a partner may hurt only beside it, which the one-mask check cannot
    see): the head and the one found start the background. Otherwise ``[]``: the heads stay set
    aside, with that step as the evidence (at the floor of the planted models small heads still
    move the score, by more than ``noise`` but far less than that share)."""
    if not floor or len(floor) >= k or heads == 0:
        return []
    first = floor[0]
    index = steps.heads.index(first)
    found = greedy_step(steps, estimate, [first], floor[1:], [], heads, 0, max(noise, (1 - FLOOR) * alone[first]),
                        go_deeper=False)
    if found is None:
        return []
    steps.labels[index] = "chosen 1, alone (the screen); not at the floor: a head lowers the score beside it"
    return [first, found]
