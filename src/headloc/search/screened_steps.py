"""Screened greedy's steps and pairs (:mod:`headloc.search.screened`, stages 2 and 3): what the
search has measured and chosen, one greedy step, and the pair probe with what it is weighed
against."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from headloc.search.guided import GuidedSteps, SetScores, short_list


class Steps:
    """What the search has measured and chosen, in the order it happened (becomes a GuidedSteps)."""

    def __init__(self, scores: SetScores, deepen: int):
        self.scores, self.gradients, self.deepen = scores, set(), deepen
        self.heads, self.drops, self.beside, self.together, self.labels = [], [], [], [], []
        self.lists, self.measured, self.backgrounds, self.picked = [], [], [], []
        self.last_order: list[int] = []
        self.displaced: list[int] = []
        self.probes: list[dict] = []  # each pair probe: what it measured and whether the pair joined
        self.leads: list[int] = []  # heads the probes' halves rank highest: on every later step's list

    def measure(self, background: list[int], heads: list[int]) -> dict[int, float]:
        """Each head's drop ablated beside ``background`` (the score beside it less the score with it)."""
        base, *scored = self.scores([background] + [background + [h] for h in heads])
        return {h: base - s for h, s in zip(heads, scored)}

    def estimate(self, estimate: Callable, background: list[int]) -> np.ndarray:
        self.gradients.add(frozenset(background))
        return np.asarray(estimate(list(background)), dtype=float)

    def choose(self, head: int, drop: float, beside: list[int], label: str, together=()) -> None:
        self.heads.append(head), self.drops.append(float(drop)), self.labels.append(label)
        self.beside.append(list(beside)), self.together.append(list(together))

    def displace(self, heads: list[int]) -> None:
        """Take back the last chosen ``heads`` (their steps stay as measured, choosing none)."""
        for head in heads[::-1]:
            for chosen in (self.heads, self.drops, self.labels, self.beside, self.together):
                chosen.pop()
            self.picked[len(self.picked) - 1 - self.picked[::-1].index(head)] = None
        self.displaced += heads

    def stopped(self, background: list[int]) -> bool:
        """Whether the last step was taken beside ``background`` and chose nothing."""
        return bool(self.picked) and self.picked[-1] is None and self.backgrounds[-1] == background

    def result(self, details: dict) -> GuidedSteps:
        return GuidedSteps(self.heads, self.drops, self.scores.count, len(self.gradients), self.lists, self.measured,
                           self.scores([()])[0], self.last_order, self.backgrounds, self.picked, self.beside,
                           self.together, self.labels, details, self.probes)


def greedy_step(steps: Steps, estimate, background: list[int], set_aside: list[int], extra: list[int], m: int,
                m_abs: int, least: float, go_deeper: bool = True) -> int | None:
    """Stage 2, one step: the listed head that lowers the score most beside ``background``, chosen
    if its drop is at least ``least``; None otherwise. ``go_deeper``: the list goes on down the
    estimate's order where its first ``m`` heads all raise the score (:func:`deeper`)."""
    excluded = set(background) | set(set_aside)
    short, steps.last_order = short_list(steps.estimate(estimate, background), excluded, m, m_abs,
                                         list(extra) + steps.leads)
    if not short:
        return None
    measured = steps.measure(background, short)
    if go_deeper and m:
        short = deeper(steps, background, excluded, short, measured, m)
    best = max(short, key=lambda h: (measured[h], -h))
    chosen = best if measured[best] >= least else None
    steps.lists.append(short), steps.measured.append(measured), steps.backgrounds.append(list(background))
    steps.picked.append(chosen)
    if chosen is not None:
        steps.choose(chosen, measured[chosen], background, f"chosen {len(background) + 1}, beside "
                                                          f"{len(background)} heads")
    return chosen


def deeper(steps: Steps, background: list[int], excluded: set[int], short: list[int], measured: dict[int, float],
           m: int) -> list[int]:
    """Where the ``m`` heads of largest estimated drop all raise the score, the estimate's order
    misleads beside this background (on SmolLM2's continent, seed 0, beside greedy's first three
    heads, the 26 largest estimated drops all raise it, by 1.7 to 12 nats; greedy's fourth is
    27th): the next ``m`` down the order are measured (into ``measured``), up to ``steps.deepen``
    times, until one lowers it. Returns the list with them."""
    order = [h for h in steps.last_order if h not in excluded]
    for start in range(m, m * (steps.deepen + 1), m):
        if any(measured[h] > 0 for h in order[start - m:start]):
            break
        batch = [h for h in order[start:start + m] if h not in measured]
        measured.update(steps.measure(background, batch))
        short = short + batch
    return short


def below_noise(steps: Steps, estimate, background: list[int], set_aside: list[int], extra: list[int], m: int,
                m_abs: int, k: int) -> list[int]:
    """After the search stops short of ``k`` heads: greedy's steps go on beside the heads found, each
    taking the listed head that lowers the score most however little, until the top k is full.
    These heads are ranked after the heads found and never counted among them. Why not the stopped
    step's runners-up: beside each other they may restore the score (on SmolLM2's language, seed 1,
    a top 5 of three heads and two runners-up cost 16.1 nats, three heads and two such steps 17.2)."""
    filled: list[int] = []
    while len(steps.heads) + len(filled) < k:
        here = background + filled
        if not steps.stopped(here):  # the stopped step measured its list beside the heads found already
            # an infinite threshold: the step is recorded as choosing nothing above the noise, and
            # its list is never empty while fewer than k <= n_heads heads are taken
            greedy_step(steps, estimate, here, set_aside, extra, m, m_abs, math.inf)
        measured = steps.measured[-1]
        filled.append(max(measured, key=lambda h: (measured[h], -h)))
    return filled


def best_pair(steps: Steps, estimate, background: list[int], set_aside: list[int], n_heads: int, candidates: int,
              leads: int, seed: int) -> tuple[tuple[int, int], float, list[int]]:
    """Stage 3's measurement: the pair of candidates (the heads of largest estimate beside the
    background or half the others ablated with it) that lowers the score most beside
    ``background``, its drop, and each half's ``leads`` heads of largest estimated drop (they
    join ``steps.leads``)."""
    taken = set(background) | set(set_aside)
    free = np.array([h for h in range(n_heads) if h not in taken])
    order = np.random.default_rng(seed).permutation(free)
    halves = [list(background) + [int(h) for h in part] for part in np.array_split(order, 2)]
    guesses = [steps.estimate(estimate, heads) for heads in [background, *halves]]
    listed = []
    for guess in guesses[1:]:  # beside half the heads ablated a backup head shows, as once its primary is
        listed += [int(h) for h in np.argsort(-guess, kind="stable") if h not in taken][:leads]
    listed = list(dict.fromkeys(listed))
    steps.leads += [h for h in listed if h not in steps.leads]
    # a head's largest estimate beside the background or either half: beside the background too, since
    # a redundant head's gradient can be large where its ablation alone changes nothing
    largest = np.max(np.abs(guesses), axis=0)
    largest[list(taken)] = -np.inf
    top = [int(h) for h in np.argsort(-largest, kind="stable")[:candidates]]
    pairs = [(a, b) for i, a in enumerate(top) for b in top[i + 1:]]
    base, *scored = steps.scores([background] + [background + list(pair) for pair in pairs])
    drops = {pair: base - s for pair, s in zip(pairs, scored)}
    best = max(pairs, key=lambda pair: (drops[pair], [-h for h in pair]))
    return best, drops[best], listed


def choose_pair(steps: Steps, pair: tuple[int, int], drop: float, background: list[int]) -> list[int]:
    for head, partner in (pair, pair[::-1]):
        steps.choose(head, drop, background, f"pair, beside {len(background)} heads", together=[partner])
    return list(pair)


def pair_probe(steps: Steps, estimate, background: list[int], set_aside: list[int], n_heads: int, candidates: int,
               leads: int, least: float, seed: int) -> list[int]:
    """Stage 3 after a step found nothing: the best pair joins if its drop is at least ``least``."""
    pair, drop, listed = best_pair(steps, estimate, background, set_aside, n_heads, candidates, leads, seed)
    steps.probes.append(probe_record(background, pair, drop, None, drop >= least, listed))
    return choose_pair(steps, pair, drop, background) if drop >= least else []


def probe_after_stop(steps: Steps, estimate, background: list[int], set_aside: list[int], extra: list[int], m: int,
                     m_abs: int, least: float, n_heads: int, candidates: int, leads: int, seed: int) -> list[int]:
    """Stage 3 after a step found nothing: the pair probe; where no pair joins and its halves led to
    heads the stopped step did not list, the step is taken again with them on its list (its other
    heads' scores are kept: only the new ones are measured), since no later step would measure them."""
    joined = pair_probe(steps, estimate, background, set_aside, n_heads, candidates, leads, least, seed)
    unlisted = set(steps.leads) - set(steps.lists[-1]) - set(background)  # a lead is never set aside
    if joined or not unlisted:
        return joined
    head = greedy_step(steps, estimate, background, set_aside, extra, m, m_abs, least)
    return [] if head is None else [head]


def probe_record(background: list[int], pair: tuple[int, int], drop: float, stepped: float | None,
                 joined: bool, leads: list[int]) -> dict:
    return {"beside": list(background), "pair": list(pair), "drop": float(drop), "leads": list(leads),
            "steps_drop": None if stepped is None else float(stepped), "joined": bool(joined)}


def pair_or_steps(steps: Steps, estimate, background: list[int], set_aside: list[int], extra: list[int], m: int,
                  m_abs: int, least: float, n_heads: int, candidates: int, leads: int, seed: int) -> list[int]:
    """Stage 3 beside the first head, weighed against two greedy steps: the best pair, then a step,
    and a second while the first has not lowered the score more than the pair. The pair joins if its
    drop is larger than the steps' heads' together by at least ``least`` (they are displaced: their
    steps stay as measured); else the steps' heads stay. Returns the heads that joined."""
    pair, drop, listed = best_pair(steps, estimate, background, set_aside, n_heads, candidates, leads, seed)
    joined, stepped = [], 0.0
    while len(joined) < 2 and (not joined or stepped < drop):
        head = greedy_step(steps, estimate, background + joined, set_aside, extra, m, m_abs, least)
        if head is None:
            break
        joined, stepped = joined + [head], stepped + steps.drops[-1]
    better = drop - stepped >= least  # a pair of a step's head and a head that moves nothing is no better
    steps.probes.append(probe_record(background, pair, drop, stepped, better, listed))
    if not better:
        return joined
    steps.displace(joined)
    return choose_pair(steps, pair, drop, background)
