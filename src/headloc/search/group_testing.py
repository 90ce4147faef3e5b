"""Adaptive group testing: find the k heads whose ablation lowers the score most by ablating groups
of heads and halving the group that hurt most (search method ``group_testing``).

The search, round by round (a :class:`~headloc.search.sequential.SequentialSearch`):

1. **Partition.** Score the unablated model (row 0 of the record) and every group of a random
   partition of the heads, once each (one round: no mask depends on another).
2. **Leads.** Each group becomes a lead: a set of heads and its *drop* (baseline minus score).
   A drop is *measured* (the set was ablated), *inferred* (a parent's drop minus its measured
   half's: additivity) or *unknown* (a set that must be measured; it carries the drop of the head
   that hid it, see 4).
3. **Split the lead that moved the score most** (the largest drop; among the leads whose drop
   stands out of the noise, :class:`~headloc.search.group_leads.Noise`, while any does): ablate its
   first half. The other half's drop is inferred as the difference. An inferred single head is
   ablated alone (**confirmation**); a measured single head at the top of the leads is
   **accepted**: no other lead can hold a larger effect, by additivity.
4. **Saturation.** When the measured half already explains the group's drop (its drop is at
   least ``explained`` = 0.9 of the group's), additivity says the other half holds nothing, but
   the score has a floor (chance, accuracy 0): a group whose score sits at the floor hides
   whatever else it holds. Such halves are remembered with the lead, and when its head is
   accepted they are ablated together, once (one mask however deep the split went: a hidden head
   is rare, a mask per level would be paid by every head). If they lower the score, they are a
   new lead like any other.
5. **Stop** when ``k + extra_heads`` heads are accepted, when ``n_masks`` are spent, or when no lead
   lowers the score any more. ``extra_heads`` heads beyond the top k are confirmed so that a top k with
   universal heads filtered out (the workflow's ``universal.filter``) still holds confirmed heads:
   otherwise each universal head in the top k gives its place to a head known only by its group.
   A search stopped before its top k are confirmed says so (:meth:`Recovery.warnings`: why it
   stopped, and each unconfirmed head of the top k with its label).

The budget is a cap, and it must at least score the baseline and the partition
(:func:`partition_budget`): a smaller one is refused, since its ranking would put heads of groups
never measured (value 0) among the top k.

``masks_per_round = 1`` is the fully sequential search (best lead first). With ``R > 1`` each
round measures the next masks of up to ``R`` best leads at once (they share forward passes); only
leads that stand out of the noise take a place, so a round may hold fewer masks rather than spend
them splitting groups that hold nothing.

**Group size** (:func:`default_group_size`): the power of two nearest to ``N ln 2 / (2 k)``.
Noiselessly, splitting costs about ``N / g + k log2 g`` tests, least at ``g = N ln 2 / k``
(Hwang's generalised binary splitting takes about ``N / k``). Real scores are not noiseless:
every head of a group adds its small effect, so a group's drop carries noise growing as
``sqrt(g)``, and a group holding two capability heads (or a universal head that takes the score
to its floor) costs extra splits. Half the noiseless optimum (64 heads for N = 1,024 and k = 5,
16 for SmolLM2's 270) loses a test or two noiselessly and wins them back on noisy scores: in
benchmarks/simulate_search.py (N = 1,024, k = 5) groups of 128 lead at 50 masks and fall behind
from 100 as the tail's noise grows, groups of 32 cost 16 more masks before the first split; with
one mask per round, 64 was within 0.1 of the best mean recall at every budget (50-150) and tail
spread (0.01-0.03 nats) tried, 16 seeds each. A power of two halves evenly down to single heads.

**Per-head values** (:attr:`Recovery.coef`, score changes: negative = the head helps): an
accepted head's measured single-head change (label ``confirmed``); for the rest, the change of
the smallest measured set that holds it, less the measured changes of the accepted heads in that
set (label ``alone``, measured alone but not accepted, or ``group of n``). Ranking: accepted heads
(:attr:`Recovery.confirmed`), most damaging first, then the rest by value, smaller sets first among
equal values, then index.

>>> import numpy as np
>>> effect = np.zeros(256); effect[[3, 77, 200]] = [0.5, 0.3, 0.2]
>>> search = GroupTesting(n_heads=256, k=3, extra_heads=0, n_masks=60, seed=0)
>>> masks, scores, found = search.complete(lambda m: 1.0 - m @ effect)
>>> sorted(found.ranking[:3].tolist()), found.n_evals, bool(masks[0].any())
([3, 77, 200], 26, False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from headloc.search.group_leads import MEASURED, Lead, Noise, accept, follow, next_steps
from headloc.search.sequential import Memory, Proposals, Recovery, SequentialSearch, check_positive_int

EXPLAINED = 0.9  # a measured half "explains" its group when it holds 90 % of the group's drop


def default_group_size(n_heads: int, k: int) -> int:
    """The partition's group size: the power of two nearest to ``N ln 2 / (2 k)`` (module docstring).

    >>> default_group_size(1024, 5), default_group_size(270, 5), default_group_size(8, 5)
    (64, 16, 1)
    """
    target = max(1.0, n_heads * math.log(2) / (2 * k))
    return min(n_heads, 2 ** round(math.log2(target)))


def partition_budget(n_heads: int, group_size: int) -> int:
    """The fewest evaluations that score the unablated model and every group of one partition.

    >>> partition_budget(270, 16), partition_budget(1024, 64)
    (18, 17)
    """
    return 1 + -(-n_heads // group_size)


@dataclass(frozen=True)
class GroupTesting(SequentialSearch):
    """Adaptive group testing (module docstring). ``group_size`` None: :func:`default_group_size`."""

    k: int = field(kw_only=True)  # k and extra_heads: the caller's (the method's options)
    extra_heads: int = field(kw_only=True)
    group_size: int | None = None
    masks_per_round: int = 1
    explained: float = EXPLAINED
    saturation: bool = True

    def __post_init__(self):
        super().__post_init__()
        check_positive_int("k", self.k)
        if self.k > self.n_heads:
            raise ValueError(f"k must lie in 1..{self.n_heads} (number of heads), got {self.k}")
        if self.group_size is not None and not 1 <= check_positive_int("group_size", self.group_size) <= self.n_heads:
            raise ValueError(f"group_size must lie in 1..{self.n_heads} (number of heads) or be None, "
                             f"got {self.group_size}")
        check_positive_int("masks_per_round", self.masks_per_round)
        check_positive_int("extra_heads", self.extra_heads, least=0, meaning="heads confirmed beyond k")
        if not 0 < self.explained <= 1:
            raise ValueError(f"explained must lie in (0, 1] (the share of a group's drop its half must hold), "
                             f"got {self.explained!r}")
        least = partition_budget(self.n_heads, self.size)
        if self.n_masks < least:
            raise ValueError(f"n_masks {self.n_masks} is too small for group testing over {self.n_heads} heads in groups "
                             f"of {self.size}: it needs at least {least} evaluations to score the unablated model and "
                             f"one partition of {least - 1} groups; give n_masks >= {least}")

    @property
    def wanted(self) -> int:
        """Heads to accept before stopping: k and the extra ones, at most every head."""
        return min(self.n_heads, self.k + self.extra_heads)

    @property
    def size(self) -> int:
        return self.group_size or default_group_size(self.n_heads, self.k)

    def partition(self) -> list[tuple[int, ...]]:
        """The random groups (a permutation of the heads cut into ceil(N / size) near-equal groups)."""
        order = np.random.default_rng(self.seed).permutation(self.n_heads)
        return [tuple(int(h) for h in part) for part in np.array_split(order, -(-self.n_heads // self.size))]

    def propose(self) -> Proposals:
        memory = Memory(self.n_heads)
        groups = self.partition()
        scores = yield from memory.measure([(), *groups])
        baseline = scores[0]
        leads = [Lead(group, baseline - score, MEASURED) for group, score in zip(groups, scores[1:])]
        noise = Noise.of([lead.drop for lead in leads], self.size)
        accepted: dict[int, float] = {}  # head -> its measured drop, in the order accepted
        while True:
            accept(leads, accepted, self.wanted)
            room = min(self.masks_per_round, self.n_masks - len(memory))
            wanting = len(accepted) < self.wanted
            steps = next_steps(leads, room, noise) if wanting else []
            if not steps:
                stop = "" if not wanting else (f"at its cap of {self.n_masks} evaluations" if room == 0 else
                                               "when no set of heads left to split lowered the score")
                return group_recovery(memory, baseline, accepted, stop, details={"group_size": self.size})
            scores = yield from memory.measure([heads for _, heads in steps])
            deepest = baseline - min(memory.scores.values())
            for (lead, heads), score in zip(steps, scores):
                leads.remove(lead)
                leads.extend(follow(lead, heads, baseline - score, self.saturated(lead, baseline - score, deepest)))

    def saturated(self, lead: Lead, half_drop: float, deepest: float) -> bool:
        """Whether a measured half may hide the rest of its lead: it explains the lead's drop, and the
        lead or the half sits at the floor (the score's floor is unknown; the lowest score seen
        estimates it). The half counts too: near the floor a score need not fall as more heads are
        ablated, so a half can drop further than its whole group (seen on the certified 1,024-head
        model: the universal head's half below its group, the role head in the other half)."""
        explains = half_drop >= self.explained * lead.drop
        at_floor = max(lead.drop, half_drop) >= self.explained * deepest
        return self.saturation and lead.drop > 0 and explains and at_floor


def group_recovery(memory: Memory, baseline: float, accepted: dict[int, float], stop: str,
                   details: dict) -> Recovery:
    """Per-head values, labels and ranking from what was measured (module docstring); ``stop``: why
    the search stopped short of the heads it wanted (:class:`Recovery`)."""
    n_heads = memory.n_heads
    coef, size = np.zeros(n_heads), np.full(n_heads, n_heads + 1)
    labels = [""] * n_heads  # every head is in a group of the partition, which is always measured
    for heads, score in sorted(memory.scores.items(), key=lambda item: len(item[0])):
        explained_away = sum(accepted[h] for h in heads if h in accepted)
        for head in heads:
            if size[head] > len(heads):
                coef[head], size[head] = score - baseline + explained_away, len(heads)
                labels[head] = "alone" if len(heads) == 1 else f"group of {len(heads)}"
    for head, drop in accepted.items():
        coef[head], labels[head] = -drop, "confirmed"
    first = sorted(accepted, key=lambda h: (coef[h], h))
    rest = [h for h in np.lexsort((np.arange(n_heads), size, coef)).tolist() if h not in accepted]
    return Recovery(np.array(first + rest, dtype=int), coef, tuple(labels), len(memory), float(baseline),
                    details, confirmed=tuple(first), stop=stop)
