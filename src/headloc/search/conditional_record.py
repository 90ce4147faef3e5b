"""The record of a conditional group testing search (:mod:`headloc.search.conditional`, whose
docstring defines its per-head values and ranking): the heads found, their values, labels and
ranking, and the details. Apart from the search: it reads only what the search found, once, at the
end."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from headloc.search.conditional_state import Found, Probe
from headloc.search.group_leads import MEASURED, Lead
from headloc.search.group_testing import group_recovery
from headloc.search.sequential import Recovery

KEPT_OUT = " (kept out of the background: the next lead drops no more beside it)"


def recovery(probe: Probe, baseline: float, found: Found, spent: bool, wanted: int, n_masks: int,
             group_size: int) -> Recovery:
    """Per-head values, labels and ranking (:mod:`headloc.search.conditional`); ``spent``: the budget
    ran out."""
    beside = found.beside.confirmed if found.beside else {}
    alone = {**found.alone.confirmed, **found.later, **found.beside_alone}
    new_pairs = {h: pair for pair in found.pairs for h in pair.heads if h not in alone and h not in beside}
    values = {**alone, **beside, **{h: pair.alone[pair.heads.index(h)] for h, pair in new_pairs.items()}}
    stop = "" if found.count >= wanted else (f"at its cap of {n_masks} evaluations" if spent else
                                             "when no set of heads left to split lowered the score")
    plain = group_recovery(probe.memory, baseline, values, stop, details={})
    labels, coef = list(plain.labels), plain.coef.copy()
    passed = {h: found.alone.noise.stands_out(Lead((h,), d, MEASURED)) for h, d in alone.items()}
    for head in [*found.alone.confirmed, *found.later]:
        labels[head] = "confirmed alone"
    for head in beside:
        tested = {True: "and alone", False: "not alone", None: "not measured alone"}[passed.get(head)]
        coef[head], labels[head] = -beside[head], f"confirmed beside the background, {tested}"
    for head, pair in new_pairs.items():
        coef[head], labels[head] = -pair.drop, f"pair ({pair.kind}): joint drop"
    for head in found.kept_out:
        labels[head] += KEPT_OUT
    order = ranked(found, {**values, **beside})
    rest = [h for h in plain.ranking.tolist() if h not in found.heads]
    details = {
        "group_size": group_size, "conditional": found.conditional, "background": found.background,
        "kept_out": found.kept_out, "accepted": order, "alone": [h for h in order if passed.get(h)],
        "beside_background": [h for h in beside if found.beside.noise.stands_out(Lead((h,), beside[h], MEASURED))],
        "pairs": [h for pair in found.pairs for h in pair.heads], "pair_kinds": [p.kind for p in found.pairs],
        "confirmed": found.count, "wanted": wanted, "budget": n_masks,
    }
    return replace(plain, ranking=np.array(order + rest, dtype=int), coef=coef, labels=tuple(labels),
                   details=details, confirmed=tuple(order), head_keys=("background", "kept_out", "accepted", "alone",
                                               "beside_background", "pairs"))


def ranked(found: Found, drops: dict[int, float]) -> list[int]:
    """The confirmed heads in the order confirmed (greedy's), each pair's new heads moved to just
    before the first single head whose drop is less than half the pair's: a pair found by the
    screen, at the end, still ranks above the heads of almost no effect confirmed before it."""
    pairs = sorted(found.pairs, key=lambda pair: -pair.drop)
    paired = {h for pair in pairs for h in pair.heads if h not in found.alone.confirmed}
    order = [h for h in found.order if h not in paired]
    for pair in pairs:
        new = [h for h in pair.heads if h in paired and h not in order]
        at = next((i for i, h in enumerate(order) if h not in paired and drops[h] < pair.drop / 2), len(order))
        order[at:at] = new
    return order
