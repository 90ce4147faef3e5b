"""What a conditional group testing search (:mod:`headloc.search.conditional`) measures and has
found: the probe that scores sets of heads within the budget, each stage's leads and confirmed heads,
the pairs found, and the confirming of a stage's top head. Apart from the search so that both its
stages and its pair finding (:mod:`headloc.search.conditional_pairs`) read and write the same state."""

from __future__ import annotations

from dataclasses import dataclass, field

from headloc.search.group_leads import MEASURED, Lead, Noise, accept
from headloc.search.sequential import Memory


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
