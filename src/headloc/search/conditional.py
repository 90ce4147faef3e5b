"""Conditional group testing: adaptive group testing that, once a head is confirmed, keeps searching
with the heads found so far ablated, answering greedy's question (which head hurts most on top of
those already chosen) by halving groups, and finds pairs of heads that matter only together (search
method ``conditional_group_testing``).

Group testing (:mod:`headloc.search.group_testing`) asks which heads matter *alone*. Greedy asks
which head hurts most *on top of the heads already chosen*, and on SmolLM2's ioi its third and
fourth heads count only beside the ones before. A backup head (IOI's backup name movers) shows no
effect at all until the head it backs up is ablated, and a redundant pair (either head suffices)
shows none until both are. This search answers both questions, in stages (one
:class:`~headloc.search.sequential.SequentialSearch`, one record):

1. **Alone.** Group testing as :class:`~headloc.search.group_testing.GroupTesting` does it (the
   partition, halving the most damaging lead, each head confirmed alone) until ``background``
   heads (1 by default) make the **background**. A head joins it only if stage 1's best lead
   left, ablated beside the background and the head (one mask), keeps at least a tenth
   (``1 - explained``) of its drop: a head that takes the score to its floor (a universal head)
   would leave nothing to find beside it, so it stays confirmed but out, and the next one is taken.
2. **Beside the background.** One new random partition of the heads not yet confirmed, each group
   ablated together with the background (``N / g`` masks), then halving as in stage 1, every mask
   with the background ablated. Each head confirmed there joins the background (checked as in 1),
   so the next one answers greedy's question for the heads chosen so far. The leads' drops were
   measured beside a smaller background: the lead about to be split or confirmed is measured again
   beside the current one first (lazily, as lazy greedy does; a lead only ever measured beside an
   older background is stale). The heads found are measured alone at the end, budget permitting,
   and ``labels`` says which of the two tests each passed. The stage starts only if the budget left
   covers its partition and one head (about ``log2 g + 2`` masks), and is dropped if no group lowers
   the score beside the background; then, and when it runs out of groups that lower the score,
   stage 1's leads go on alone.
3. **Pairs.** Additive halving meets a pair that acts only together as a contradiction: a group
   holding both heads drops, the split separates them, neither half's measured drop holds the
   group's, so the inferred rest keeps a drop no head of it has; confirming that last head alone
   measures almost nothing. The group's drop less its measured parts (the residual) is the pair's.
   When it stands out of the noise (:class:`~headloc.search.group_testing.Noise`, at the group's
   size), :func:`locate_pair` finds the pair: the split that separated it (one mask per level),
   then each head by halving one side with the other side ablated (one mask per level each, two at
   the first), and the pair and each head measured (three masks). A pair is **redundant** when
   neither head's drop alone stands out, a **backup** pair when one does, **more than the sum**
   when both do. Only pairs inside one group of a partition show this contradiction (about
   ``2 g / N`` of them over both partitions), so ``pair_screen`` ablates, at the end, every union
   of two groups of the last partition beside the background (``m (m - 1) / 2`` masks for ``m``
   groups; neighbouring groups are merged until that fits the budget left) and resolves, largest
   first, each union whose drop exceeds the sum of its two groups' by more than the unions' median
   excess plus ``SCREEN_Z`` (4) spreads of it (the score is not additive: many heads' small effects
   add up unevenly, often all in one direction, and a pair must stand out of that).
4. **Stop** when ``k + extra_heads`` heads are confirmed (a pair counts as two), when the budget is
   spent, or when no lead lowers the score any more; ``pair_screen`` then screens what budget is left.

**Per-head values** (:attr:`Recovery.coef`, score changes): a head confirmed alone its drop alone,
a head confirmed beside the background its drop there (greedy's gain for it), a pair's heads their
joint drop; every other head the change of the smallest measured set holding it, as group
testing's. **Ranking**: the confirmed heads in the order confirmed (greedy's order; a pair just
before the first head whose drop is under half the pair's), then the rest as group testing ranks
them. ``details`` names the background, the heads kept out of it, the heads
that passed alone and beside the background, the pairs (two by two) and their kinds, what became
of stage 2, and ``confirmed`` against ``wanted`` and ``budget`` (a search that stops at its cap
short of its heads).

>>> import numpy as np
>>> effect = np.zeros(256); effect[[3, 77, 200]] = [0.5, 0.3, 0.2]
>>> search = ConditionalGroupTesting(n_heads=256, n_masks=80, seed=0, k=3, extra_heads=0)
>>> masks, scores, found = search.complete(lambda m: 1.0 - m @ effect)
>>> found.ranking[:3].tolist(), found.details["background"]
([3, 77, 200], [3, 77, 200])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from headloc.search.group_testing import (EXPLAINED, INFERRED, MEASURED, GroupTesting, Lead, Noise, accept, follow,
                                          group_recovery, next_steps)
from headloc.search.sequential import Memory, Proposals, Recovery, SequentialSearch, check_positive_int

PAIR_KINDS = ("redundant", "backup", "more than the sum")  # by how many of its heads stand out alone
PAIR_RESERVE = 4  # masks per bit of N kept to locate and check a pair the screen flags
SCREEN_Z = 4.0  # a union's excess must stand 4 spreads above the unions' median excess
KEPT_OUT = " (kept out of the background: the next lead drops no more beside it)"


class Spent(Exception):
    """The budget cannot hold the next masks: the search ends with what it has confirmed."""


class Probe:
    """Scores sets of heads through a :class:`Memory` within a budget; drops beside a background."""

    def __init__(self, n_heads: int, n_masks: int):
        self.memory, self.n_masks = Memory(n_heads), n_masks

    def scores(self, head_sets: list):
        new = {frozenset(heads) for heads in head_sets} - self.memory.scores.keys()
        if len(self.memory) + len(new) > self.n_masks:
            raise Spent
        return (yield from self.memory.measure(head_sets))

    def drops(self, background: tuple, head_sets: list):
        """Each set's drop when ablated beside ``background``: score(background) - score(both)."""
        base, *scores = yield from self.scores([background, *(background + tuple(s) for s in head_sets)])
        return [base - score for score in scores]

    def room(self) -> int:
        return self.n_masks - len(self.memory)

    def deepest(self, background: tuple) -> float:
        """The largest drop seen below ``background``'s score: the room to the floor, as far as known."""
        return self.memory.scores[frozenset(background)] - min(self.memory.scores.values())


@dataclass
class Stage:
    """One stage's halving: its background, leads, noise and the heads it confirmed (head -> drop).
    ``chains``: for an inferred lead, the measured set its drop came from and the parts of that
    set measured since (the contradiction of a pair is read from them). ``fresh``: the leads
    measured (or inferred) beside the current background, where it ``grows``."""

    background: tuple[int, ...]
    leads: list[Lead]
    noise: Noise
    confirmed: dict[int, float] = field(default_factory=dict)
    chains: dict[tuple, tuple[tuple, list]] = field(default_factory=dict)
    grows: bool = False
    fresh: set[tuple] = field(default_factory=set)

    def stale(self, lead: Lead) -> bool:
        return self.grows and lead.heads not in self.fresh


@dataclass
class Pair:
    heads: tuple[int, int]
    drop: float  # beside the background it was found at
    alone: tuple[float, float]  # each head's drop alone, beside that background
    kind: str


@dataclass
class Found:
    """Everything confirmed so far: ``order`` the heads in the order confirmed."""

    alone: Stage
    beside: Stage | None = None
    later: dict[int, float] = field(default_factory=dict)  # confirmed alone after stage 2
    admitted: list[int] = field(default_factory=list)  # stage 1's background
    kept_out: list[int] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    beside_alone: dict[int, float] = field(default_factory=dict)  # stage 2's heads: their drop alone
    order: list[int] = field(default_factory=list)
    conditional: str = "not reached"

    def known(self, stage: Stage) -> dict[int, float]:
        """The drops of the heads confirmed beside ``stage``'s background."""
        return {**self.alone.confirmed, **self.later} if not stage.background else dict(stage.confirmed)

    @property
    def background(self) -> list[int]:
        return list(self.beside.background) if self.beside else list(self.admitted)

    @property
    def heads(self) -> set[int]:
        return set(self.order)

    @property
    def count(self) -> int:
        return len(self.order)


@dataclass(frozen=True)
class ConditionalGroupTesting(SequentialSearch):
    """Conditional group testing (module docstring). ``group_size`` None: the default of
    :func:`~headloc.search.group_testing.default_group_size`; ``background``: heads confirmed alone
    before the search goes on beside them (at most ``k - 1``; 0: group testing)."""

    k: int = field(kw_only=True)  # k and extra_heads: the caller's (group testing's)
    extra_heads: int = field(kw_only=True)
    group_size: int | None = None
    background: int = 1
    pair_screen: bool = False
    explained: float = EXPLAINED

    def __post_init__(self):
        super().__post_init__()
        self.plain  # checks k, group_size, extra_heads and explained as group testing does
        check_positive_int("background", self.background, least=0, meaning="heads confirmed alone first")
        if not isinstance(self.pair_screen, bool):
            raise ValueError(f"pair_screen must be true or false, got {self.pair_screen!r}")

    @property
    def plain(self) -> GroupTesting:
        """Stage 1: group testing with the same heads, n_masks, seed and options."""
        return GroupTesting(self.n_heads, self.n_masks, self.seed, k=self.k, group_size=self.group_size,
                            extra_heads=self.extra_heads, explained=self.explained)

    @property
    def wanted(self) -> int:
        return self.plain.wanted

    def propose(self) -> Proposals:
        probe, plain = Probe(self.n_heads, self.n_masks), self.plain
        groups = plain.partition()[: self.n_masks - 1]
        (baseline,) = yield from probe.scores([()])
        drops = yield from probe.drops((), groups)
        found = Found(Stage((), [Lead(g, d, MEASURED) for g, d in zip(groups, drops)], Noise.of(drops, plain.size)))
        spent = False
        try:
            yield from self.form_background(probe, found)
            screened = (yield from self.beside_background(probe, found)) or groups
            alone = found.alone
            yield from self.halve(probe, Stage((), alone.leads, alone.noise, found.later, alone.chains), found,
                                  self.wanted)
            if self.pair_screen:
                yield from self.screen_pairs(probe, found, found.beside or alone, screened)
        except Spent:
            spent = True
        return self.recovery(probe, baseline, found, spent)

    def form_background(self, probe: Probe, found: Found):
        """Stage 1: confirm heads alone until ``background`` of them are admitted to the background."""
        size = min(self.background, self.k - 1)
        while len(found.admitted) < size and found.count < self.wanted:
            before, count = set(found.alone.confirmed), found.count
            yield from self.halve(probe, found.alone, found, found.count + 1)
            if found.count == count:
                return
            for head in [h for h in found.alone.confirmed if h not in before]:  # none if a pair was found
                admitted = yield from self.admit(probe, found.alone, tuple(found.admitted), head)
                (found.admitted if admitted else found.kept_out).append(head)

    def admit(self, probe: Probe, stage: Stage, background: tuple, head: int):
        """Whether the stage's best lead left (of at least ``1 - explained`` of the head's drop),
        ablated beside ``background`` and ``head``, keeps ``1 - explained`` of its drop (one mask);
        not if the head leaves it next to nothing (the score's floor). A growing stage's background
        grows; the lead is fresh there."""
        # leads of a tenth of the head's drop at least (smaller ones say nothing about a floor) whose
        # drop was measured beside the current background: not an inferred one (a pair split apart
        # leaves an inferred drop no head holds), an unknown one (it carries the drop of the head
        # that hid it) or a stale one
        least = (1 - self.explained) * stage.confirmed[head]
        usable = (lead for lead in stage.leads if lead.drop >= least and lead.status == MEASURED and not stage.stale(lead))
        top = min(usable, key=Lead.order, default=None)
        if top:
            (drop,) = yield from probe.drops(background + (head,), [top.heads])
            if drop < (1 - self.explained) * top.drop:
                return False
        if stage.grows:
            stage.background, stage.fresh, stage.chains = background + (head,), set(), {}
            if top:
                stage.leads[stage.leads.index(top)] = Lead(top.heads, drop, MEASURED, top.hidden)
                stage.fresh.add(top.heads)
        return True

    def beside_background(self, probe: Probe, found: Found):
        """Stage 2: a new partition of the unconfirmed heads, each group ablated beside the
        background, then halving there with the background growing; the heads found are measured
        alone too. Returns the stage's groups, or None when it did not run (``found.conditional``)."""
        background = tuple(found.background)
        left = [h for h in range(self.n_heads) if h not in found.heads]
        size, still = self.plain.size, self.wanted - found.count
        if not background or still <= 0 or not left:
            found.conditional = "nothing to condition on" if not background else "not needed"
            return None
        order = np.random.default_rng([self.seed, 1]).permutation(left)
        groups = [tuple(int(h) for h in part) for part in np.array_split(order, -(-len(left) // size))]
        if probe.room() < len(groups) + 1 + math.log2(size) + 2:  # the partition and one head
            found.conditional = "skipped: the budget left is too small"
            return None
        drops = yield from probe.drops(background, groups)
        leads = [Lead(g, d, MEASURED) for g, d in zip(groups, drops)]
        if not any(lead.drop > 0 for lead in leads):  # at the floor
            found.conditional = "dropped: no group lowers the score beside the background"
            return None
        found.conditional = "run"
        found.beside = Stage(background, leads, Noise.of(drops, size), grows=True, fresh=set(groups))
        yield from self.halve(probe, found.beside, found, self.wanted)
        for head in found.beside.confirmed:
            (found.beside_alone[head],) = yield from probe.drops((), [(head,)])
        return groups

    def halve(self, probe: Probe, stage: Stage, found: Found, limit: int):
        """Split the stage's best lead, mask by mask, until ``limit`` heads are confirmed in all or
        no lead lowers the score; a stale lead is measured again first, a confirmed head joins a
        growing background, a contradiction (module docstring, 3) is resolved at once."""
        while True:
            stage.leads.sort(key=Lead.order)
            if stage.leads and stage.stale(stage.leads[0]):
                yield from self.refresh(probe, stage, stage.leads[0])
                continue
            new = take(stage, found, limit)
            if new is not None and stage.grows and not (yield from self.admit(probe, stage, stage.background, new)):
                found.kept_out.append(new)
            if found.count >= limit:
                return
            steps = next_steps(stage.leads, 1, stage.noise)
            if not steps:
                return
            ((lead, heads),) = steps
            if stage.stale(lead):
                yield from self.refresh(probe, stage, lead)
                continue
            (drop,) = yield from probe.drops(stage.background, [heads])
            saturated = self.plain.saturated(lead, drop, probe.deepest(stage.background))
            stage.leads.remove(lead)
            followers = follow(lead, heads, drop, saturated)
            stage.leads.extend(followers)
            stage.fresh |= {other.heads for other in followers}
            contradiction = track(stage, lead, heads, drop, saturated)
            if contradiction:
                yield from self.resolve(probe, stage, found, *contradiction)

    def refresh(self, probe: Probe, stage: Stage, lead: Lead):
        """Measure a stale lead again beside the stage's current background."""
        (drop,) = yield from probe.drops(stage.background, [lead.heads])
        stage.leads[stage.leads.index(lead)] = Lead(lead.heads, drop, MEASURED, lead.hidden)
        stage.fresh.add(lead.heads)

    def resolve(self, probe: Probe, stage: Stage, found: Found, parts: list, residual: float):
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
                yield from self.confirm_pair(probe, stage, found, pair)
            return

    def confirm_pair(self, probe: Probe, stage: Stage, found: Found, pair: tuple[int, int]):
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

    def screen_pairs(self, probe: Probe, found: Found, stage: Stage, groups: list):
        """Every union of two screen groups beside the stage's background (module docstring, 3);
        the unions whose excess over their two groups' drops stands ``SCREEN_Z`` spreads above the
        unions' median excess (and above a pair's noise) are resolved, largest excess first."""
        groups = screen_groups(groups, probe.room() - PAIR_RESERVE * math.ceil(math.log2(self.n_heads)))
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
                yield from self.confirm_pair(probe, stage, found, pair)

    def recovery(self, probe: Probe, baseline: float, found: Found, spent: bool) -> Recovery:
        """Per-head values, labels and ranking (module docstring); ``spent``: the budget ran out."""
        beside = found.beside.confirmed if found.beside else {}
        alone = {**found.alone.confirmed, **found.later, **found.beside_alone}
        new_pairs = {h: pair for pair in found.pairs for h in pair.heads if h not in alone and h not in beside}
        values = {**alone, **beside, **{h: pair.alone[pair.heads.index(h)] for h, pair in new_pairs.items()}}
        stop = "" if found.count >= self.wanted else (f"at its cap of {self.n_masks} evaluations" if spent else
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
            "group_size": self.plain.size, "conditional": found.conditional, "background": found.background,
            "kept_out": found.kept_out, "accepted": order, "alone": [h for h in order if passed.get(h)],
            "beside_background": [h for h in beside if found.beside.noise.stands_out(Lead((h,), beside[h], MEASURED))],
            "pairs": [h for pair in found.pairs for h in pair.heads], "pair_kinds": [p.kind for p in found.pairs],
            "confirmed": found.count, "wanted": self.wanted, "budget": self.n_masks,
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


def screen_groups(groups: list, room: int) -> list:
    """``groups`` merged two by two (neighbours), as often as needed for the screen (every union of
    two, and each merged group) to fit in ``room`` masks: the finest screen the budget allows."""
    while len(groups) > 2 and math.comb(len(groups), 2) + len(groups) > room:
        groups = [sum(groups[i:i + 2], ()) for i in range(0, len(groups), 2)]
    return groups


def take(stage: Stage, found: Found, limit: int) -> int | None:
    """Confirm the stage's measured single head at the top of its leads, if it is fresh and fewer
    than ``limit`` heads are confirmed in all; a head confirmed before (in another stage) is passed
    over. Returns the head confirmed, or None."""
    while found.count < limit and stage.leads:
        stage.leads.sort(key=Lead.order)
        top = stage.leads[0]
        if top.status == MEASURED and len(top.heads) == 1 and top.heads[0] in found.heads:
            stage.leads.pop(0)
            continue
        if stage.stale(top):
            return None
        before = len(stage.confirmed)
        accept(stage.leads, stage.confirmed, before + 1)
        if len(stage.confirmed) == before:
            return None
        head = list(stage.confirmed)[-1]
        found.order.append(head)
        return head
    return None


def track(stage: Stage, lead: Lead, heads: tuple, drop: float, saturated: bool):
    """Keep each inferred lead's chain (the measured set its drop came from, and its parts measured
    since); return ``(parts, residual)`` when an inferred single head measured alone leaves its
    set's drop unexplained by more than the noise (module docstring, 3)."""
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
