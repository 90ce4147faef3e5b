"""The leads of adaptive group testing (:mod:`headloc.search.group_testing`, which explains the
search): a set of heads with the drop its ablation causes, and the rules that decide which lead to
measure next, which to accept as a head and what replaces a lead once its half is measured.

They stand apart from the search because the searches built on group testing reuse them
(:mod:`headloc.search.conditional`, its state, pairs and record): every one keeps the same account
of measured, inferred and unknown drops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MEASURED, INFERRED, UNKNOWN = "measured", "inferred", "unknown"
NOISE_Z = 2.0  # a lead stands out of the noise when its drop exceeds twice the spread of its size


@dataclass(frozen=True)
class Lead:
    """A set of heads that may hold capability heads, and how much ablating it lowers the score."""

    heads: tuple[int, ...]
    drop: float
    status: str
    hidden: tuple[int, ...] = ()  # halves this lead explained away (saturation): ablated once it is accepted

    def order(self):  # the largest drop first; then smaller sets, then the lower head
        return -self.drop, len(self.heads), min(self.heads)


def accept(leads: list[Lead], accepted: dict[int, float], k: int) -> None:
    """Accept every measured single head at the top of the leads (up to k in all); the halves an
    accepted head explained away become one lead to measure next (saturation)."""
    leads.sort(key=Lead.order)
    while leads and len(accepted) < k:
        top = leads[0]
        if top.status != MEASURED or len(top.heads) > 1 or top.drop <= 0:
            return
        leads.pop(0)
        accepted[top.heads[0]] = top.drop
        if top.hidden:
            leads.insert(0, Lead(top.hidden, top.drop, UNKNOWN))


@dataclass(frozen=True)
class Noise:
    """How far a lead's drop must stand out to be worth a mask before the others: ``z`` times the
    spread of a set of its size. Every head adds its small effect to a set's drop, so the spread
    grows as the square root of the set's size; the partition's drops estimate it (their median
    absolute deviation: robust to the few groups that hold capability heads)."""

    per_head: float
    z: float = NOISE_Z

    @classmethod
    def of(cls, group_drops, group_size: int) -> "Noise":
        drops = np.asarray(group_drops, dtype=float)
        spread = 1.4826 * np.median(np.abs(drops - np.median(drops))) if len(drops) else 0.0
        return cls(spread / math.sqrt(group_size))

    def stands_out(self, lead: Lead) -> bool:
        return lead.drop > self.z * self.per_head * math.sqrt(len(lead.heads))


def next_steps(leads: list[Lead], room: int, noise: Noise) -> list[tuple[Lead, tuple[int, ...]]]:
    """The next masks (at most ``room``) of the best leads (sorted) whose drop stands out of the
    noise, or of the best lead alone when none does: a lead's first half (a split), or the lead
    itself (an inferred single head to confirm, an unknown set). Leads that do not lower the score,
    and measured single heads not yet at the top, wait. Without the noise rule a round of R masks
    would spend most of them splitting groups that hold nothing."""
    steps = []
    for lead in leads:
        if lead.drop <= 0:
            break
        if lead.status == MEASURED and len(lead.heads) == 1:
            continue
        whole = lead.status == UNKNOWN or len(lead.heads) == 1
        steps.append((lead, lead.heads if whole else lead.heads[: len(lead.heads) // 2]))
    clear = [step for step in steps if noise.stands_out(step[0])]
    return (clear or steps[:1])[:room]


def follow(lead: Lead, heads: tuple[int, ...], drop: float, saturated: bool) -> list[Lead]:
    """The leads that replace ``lead`` once ``heads`` (it, or its first half) has been measured;
    ``saturated``: the half explains the lead's drop at the floor, so the rest is hidden, not cleared."""
    if heads == lead.heads:
        return [Lead(heads, drop, MEASURED, lead.hidden)]
    rest = lead.heads[len(heads):]
    if saturated:
        return [Lead(heads, drop, MEASURED, lead.hidden + rest)]
    inferred = lead.drop - drop
    if drop >= inferred:  # the earlier hidden halves go with the half that holds the larger drop
        return [Lead(heads, drop, MEASURED, lead.hidden), Lead(rest, inferred, INFERRED)]
    return [Lead(heads, drop, MEASURED), Lead(rest, inferred, INFERRED, lead.hidden)]
