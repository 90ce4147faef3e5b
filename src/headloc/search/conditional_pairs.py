"""Pairs of heads that matter only together, as conditional group testing
(:mod:`headloc.search.conditional`, its stage 3) finds them: the contradiction a pair leaves in
halving, locating the pair across two measured sets, checking it, and the screen of unions of two
groups. Apart from the search's stages: the same pair finding serves halving in every stage and
the screen at the end.

Additive halving meets a pair that acts only together as a contradiction: a group holding both heads
drops, the split separates them, neither half's measured drop holds the group's, so the inferred
rest keeps a drop no head of it has; confirming that last head alone measures almost nothing. The
group's drop less its measured parts (the residual) is the pair's. When it stands out of the noise
(:class:`~headloc.search.group_leads.Noise`, at the group's size), :func:`locate_pair` finds the
pair: the split that separated it (one mask per level), then each head by halving one side with the
other side ablated (one mask per level each, two at the first), and the pair and each head measured
(three masks). A pair is **redundant** when neither head's drop alone stands out, a **backup** pair
when one does, **more than the sum** when both do. Only pairs inside one group of a partition show
this contradiction (about ``2 g / N`` of them over both partitions), so ``pair_screen`` ablates, at
the end, every union of two groups of the last partition beside the background (``m (m - 1) / 2``
masks for ``m`` groups; neighbouring groups are merged until that fits the budget left) and
resolves, largest first, each union whose drop exceeds the sum of its two groups' by more than the
unions' median excess plus ``SCREEN_Z`` (4) spreads of it (the score is not additive: many heads'
small effects add up unevenly, often all in one direction, and a pair must stand out of that).
"""

from __future__ import annotations

import math

import numpy as np

from headloc.search.conditional_state import Found, Pair, Probe, Stage
from headloc.search.group_leads import INFERRED, MEASURED, Lead

PAIR_KINDS = ("redundant", "backup", "more than the sum")  # by how many of its heads stand out alone
PAIR_RESERVE = 4  # masks per bit of N kept to locate and check a pair the screen flags
SCREEN_Z = 4.0  # a union's excess must stand 4 spreads above the unions' median excess


def track(stage: Stage, lead: Lead, heads: tuple, drop: float, saturated: bool):
    """Keep each inferred lead's chain (the measured set its drop came from, and its parts measured
    since); return ``(parts, residual)`` when an inferred single head measured alone leaves its
    set's drop unexplained by more than the noise (module docstring)."""
    if heads != lead.heads:
        if not saturated:
            origin, parts = stage.chains.get(lead.heads, (lead.heads, [])) if lead.status == INFERRED \
                else (lead.heads, [])
            stage.chains[lead.heads[len(heads):]] = (origin, [*parts, (heads, drop)])
        return None
    if lead.status != INFERRED or lead.heads not in stage.chains:
        return None
    origin, parts = stage.chains.pop(lead.heads)
    residual = lead.drop - drop
    if drop < residual and stage.noise.stands_out(Lead(origin, residual, INFERRED)):
        return [*parts, (heads, drop)], residual
    return None


def resolve(probe: Probe, stage: Stage, found: Found, parts: list, residual: float):
    """A measured set whose parts (all measured since) fall ``residual`` short of its drop: find
    the split that separated the pair (one mask per level) and the pair across it."""
    for i in range(len(parts) - 1):
        rest = tuple(h for part in parts[i + 1:] for h in part[0])
        if i < len(parts) - 2:
            (joint,) = yield from probe.drops(stage.background, [rest])
            if joint - sum(part[1] for part in parts[i + 1:]) >= residual / 2:
                continue  # the pair lies further down the chain
        else:
            joint = parts[-1][1]
        pair = yield from locate_pair(probe, stage.background, parts[i], (rest, joint), residual,
                                      found.known(stage))
        if pair:
            yield from confirm_pair(probe, stage, found, pair)
        return


def confirm_pair(probe: Probe, stage: Stage, found: Found, pair: tuple[int, int]):
    """Measure the pair and each head beside the stage's background; keep it if the pair drops
    by more than its heads alone, by more than the noise."""
    if set(pair) <= found.heads:
        return
    joint, *alone = yield from probe.drops(stage.background, [pair, pair[:1], pair[1:]])
    if not stage.noise.stands_out(Lead(pair, joint - sum(alone), INFERRED)):
        return
    passed = [stage.noise.stands_out(Lead((h,), d, MEASURED)) for h, d in zip(pair, alone)]
    found.pairs.append(Pair(pair, joint, tuple(alone), PAIR_KINDS[sum(passed)]))
    found.order += [h for h in pair if h not in found.heads]


def screen_pairs(probe: Probe, found: Found, stage: Stage, groups: list, n_heads: int):
    """Every union of two screen groups beside the stage's background (module docstring);
    the unions whose excess over their two groups' drops stands ``SCREEN_Z`` spreads above the
    unions' median excess (and above a pair's noise) are resolved, largest excess first."""
    groups = screen_groups(groups, probe.room() - PAIR_RESERVE * math.ceil(math.log2(n_heads)))
    drops = yield from probe.drops(stage.background, groups)
    unions = [(i, j) for i in range(len(groups)) for j in range(i + 1, len(groups))]
    joints = yield from probe.drops(stage.background, [groups[i] + groups[j] for i, j in unions])
    excess = np.array([joint - drops[i] - drops[j] for joint, (i, j) in zip(joints, unions)])
    centre = float(np.median(excess)) if len(excess) else 0.0  # unions' typical excess: not a pair's
    spread = 1.4826 * np.median(np.abs(excess - centre)) if len(excess) else 0.0
    for n in np.argsort(-excess, kind="stable"):
        (i, j), residual = unions[n], float(excess[n])
        pair_noise = Lead((groups[i][0], groups[j][0]), residual - centre, INFERRED)
        if residual - centre <= SCREEN_Z * spread or not stage.noise.stands_out(pair_noise):
            return
        if any(set(p.heads) <= set(groups[i] + groups[j]) for p in found.pairs):
            continue  # a pair already found explains it
        pair = yield from locate_pair(probe, stage.background, (groups[i], drops[i]), (groups[j], drops[j]),
                                      residual, found.known(stage))
        if pair:
            yield from confirm_pair(probe, stage, found, pair)


def screen_groups(groups: list, room: int) -> list:
    """``groups`` merged two by two (neighbours), as often as needed for the screen (every union of
    two, and each merged group) to fit in ``room`` masks: the finest screen the budget allows."""
    while len(groups) > 2 and math.comb(len(groups), 2) + len(groups) > room:
        groups = [sum(groups[i:i + 2], ()) for i in range(0, len(groups), 2)]
    return groups


def locate_pair(probe: Probe, background: tuple, x: tuple, y: tuple, residual: float, known: dict):
    """The pair across two measured sets ``x`` and ``y`` (each ``(heads, drop)``) whose union drops
    ``residual`` more than both: one head of ``x`` found by halving it with ``y`` ablated, then one
    of ``y`` with that head ablated. None when the excess is not a pair's (:func:`locate`)."""
    a = yield from locate(probe, background, x, y, residual, known)
    b = (yield from locate(probe, background, y, ((a[0],), a[1]), residual, known)) if a else None
    return (a[0], b[0]) if b and a[0] != b[0] else None


def locate(probe: Probe, background: tuple, side: tuple, partner: tuple, residual: float, known: dict):
    """The head of ``side`` that makes ``partner`` drop ``residual`` more, with its inferred drop
    alone: halve ``side``, ablating a half with ``partner``; the half holding the head drops by the
    residual more than its share of the side's drop (known heads' drops exactly, the rest in
    proportion to their number). At the first split both halves are measured: a pair's excess lies
    in one of them, while the excess of many heads' small effects adding up unevenly (the score is
    not additive) spreads over both; None then, after two masks instead of a whole search."""
    heads, drop = side
    partner_heads, partner_drop = partner
    first = True
    while len(heads) > 1:
        halves = (heads[: len(heads) // 2], heads[len(heads) // 2:])
        measured = halves if first and len(heads) > 2 else halves[:1]
        joints = yield from probe.drops(background, [partner_heads + half for half in measured])
        surplus = [j - partner_drop - expected_share(heads, drop, half, known) for j, half in zip(joints, measured)]
        if len(surplus) == 2 and (surplus[0] >= residual / 2) == (surplus[1] >= residual / 2):
            return None
        first = False
        if surplus[0] >= residual / 2:
            heads, drop = halves[0], joints[0] - partner_drop - residual
        else:
            heads, drop = halves[1], drop - (joints[0] - partner_drop)
    return heads[0], drop


def expected_share(heads: tuple, drop: float, half: tuple, known: dict) -> float:
    """What ``half`` of ``heads`` should drop by additivity: its known heads' drops, and the rest of
    ``drop`` in proportion to its unknown heads."""
    unknown = [h for h in heads if h not in known]
    rest = drop - sum(known[h] for h in heads if h in known)
    unknown_half = [h for h in half if h not in known]
    return sum(known[h] for h in half if h in known) + (rest * len(unknown_half) / len(unknown) if unknown else 0.0)
