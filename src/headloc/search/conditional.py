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
3. **Pairs.** A pair of heads that acts only together leaves a contradiction in halving, resolved
   at once; ``pair_screen`` screens unions of two groups for the pairs halving does not meet
   (:mod:`headloc.search.conditional_pairs`).
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
from dataclasses import dataclass, field

import numpy as np

from headloc.search.conditional_pairs import resolve, screen_pairs, track
from headloc.search.conditional_record import recovery
from headloc.search.conditional_state import Found, Probe, Spent, Stage, take
from headloc.search.group_leads import MEASURED, Lead, Noise, follow, next_steps
from headloc.search.group_testing import EXPLAINED, GroupTesting
from headloc.search.sequential import Proposals, SequentialSearch, check_positive_int

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
                yield from screen_pairs(probe, found, found.beside or alone, screened, self.n_heads)
        except Spent:
            spent = True
        return recovery(probe, baseline, found, spent, self.wanted, self.n_masks, self.plain.size)

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
        growing background, a contradiction (a pair: :mod:`headloc.search.conditional_pairs`) is
        resolved at once."""
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
                yield from resolve(probe, stage, found, *contradiction)

    def refresh(self, probe: Probe, stage: Stage, lead: Lead):
        """Measure a stale lead again beside the stage's current background."""
        (drop,) = yield from probe.drops(stage.background, [lead.heads])
        stage.leads[stage.leads.index(lead)] = Lead(lead.heads, drop, MEASURED, lead.hidden)
        stage.fresh.add(lead.heads)
