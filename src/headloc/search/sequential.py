"""Sequential searches: the masks of the next round depend on the scores of the last ones.

A sequential search is a frozen settings object (:class:`SequentialSearch`: heads, budget, seed,
options) whose methods are pure functions of **the record**, the masks scored so far and their
scores, in the order they were scored:

- ``masks``: an ``(M, N)`` int8 array, ``masks[i, j] = 1`` when head ``j`` is ablated in row ``i``;
- ``scores``: ``(M,)`` floats, oriented so that higher is better.

Row 0 is always the all-zero mask: the unablated baseline is part of the record and counts as one
evaluation. Every search needs it (its per-head values are score changes from it, the damage
reward of Thompson sampling is a drop from it), and a scoring job that writes it to the record
like any other mask needs no second kind of file.

:meth:`SequentialSearch.next_masks` returns the next round (masks that can share forward passes),
or None when the search is done; :meth:`SequentialSearch.recover` turns a finished record into the
:class:`Recovery`. Both replay the search from the start, feeding it the record's scores, so a job
can be killed at any point, reload its record and go on: a round cut short returns only its masks
not yet scored, in the same order, and no mask is ever proposed twice (the search answers a mask it
has scored from memory). The same settings and record always give the same masks: all randomness
comes from ``seed``. A record must therefore be appended in the order the masks were proposed.

A search is written as a generator, :meth:`SequentialSearch.plan`: it yields each round's masks
(through :meth:`Memory.measure`), receives their scores, and returns its :class:`Recovery`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

Plan = Generator[np.ndarray, np.ndarray, "Recovery"]


@dataclass(frozen=True)
class Recovery:
    """What a finished sequential search found, in flat head indices.

    ranking: every head, most damaging first. coef: each head's value for the heatmap (what it is
    says ``labels``, one short phrase per head). n_evals: masks scored (the baseline row included).
    baseline: the unablated score. details: what only this search knows (JSON-ready values).
    """

    ranking: np.ndarray
    coef: np.ndarray
    labels: tuple[str, ...]
    n_evals: int
    baseline: float
    details: Mapping = field(default_factory=dict)


class Memory:
    """Every mask a search has scored (keyed by its set of ablated heads), so none is scored twice."""

    def __init__(self, n_heads: int):
        self.n_heads = n_heads
        self.scores: dict[frozenset, float] = {}

    def __len__(self) -> int:
        return len(self.scores)

    def row(self, heads: Iterable[int]) -> np.ndarray:
        mask = np.zeros(self.n_heads, dtype=np.int8)
        mask[list(heads)] = 1
        return mask

    def measure(self, head_sets: list) -> Generator[np.ndarray, np.ndarray, list[float]]:
        """Yield the masks of ``head_sets`` not scored yet (each once, in order), then return every
        set's score. Use as ``scores = yield from memory.measure(sets)``; yields nothing when all
        are known."""
        keys = [frozenset(int(h) for h in heads) for heads in head_sets]
        new = list(dict.fromkeys(key for key in keys if key not in self.scores))
        if new:
            scores = yield np.array([self.row(key) for key in new], dtype=np.int8)
            self.scores.update(zip(new, (float(s) for s in scores)))
        return [self.scores[key] for key in keys]


def check_positive_int(name: str, value, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return int(value)


def check_choice(name: str, value, valid: tuple) -> None:
    if value not in valid:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, valid))}, got {value!r}")


@dataclass(frozen=True)
class SequentialSearch:
    """The record -> next masks interface every sequential search shares (see the module docstring).

    Subclasses add their options as fields, check them in ``__post_init__`` and write :meth:`plan`.
    """

    n_heads: int
    budget: int
    seed: int = 0

    def __post_init__(self):
        check_positive_int("n_heads", self.n_heads)
        check_positive_int("budget", self.budget, least=2)  # the baseline and one mask

    def plan(self) -> Plan:
        raise NotImplementedError

    def next_masks(self, masks, scores) -> np.ndarray | None:
        """The masks to score next (a round, or what is left of it), or None when the search is done."""
        pending, _ = self._replay(masks, scores)
        return pending

    def recover(self, masks, scores) -> Recovery:
        """The result of a finished record (ValueError if the search would still score masks)."""
        pending, found = self._replay(masks, scores)
        if pending is not None:
            raise ValueError(f"the record of {len(scores)} masks is unfinished: {len(pending)} more to score")
        return found

    def run(self, score: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray, Recovery]:
        """The whole search in-process: ``score(masks) -> scores`` for each round. Returns the
        record (masks, scores) and the recovery, as a job that was never interrupted would."""
        plan, rows, values = self.plan(), [], []
        try:
            batch = next(plan)
            while True:
                rows.append(batch)
                values.append(np.asarray(score(batch), dtype=float))
                batch = plan.send(values[-1])
        except StopIteration as done:
            found = done.value
        return np.vstack(rows), np.concatenate(values), found

    def _replay(self, masks, scores) -> tuple[np.ndarray | None, Recovery | None]:
        masks, scores = self._checked(masks, scores)
        plan, position = self.plan(), 0
        try:
            batch = next(plan)
            while True:
                taken = min(len(batch), len(masks) - position)
                if not np.array_equal(masks[position:position + taken], batch[:taken]):
                    raise ValueError(f"rows {position}..{position + taken - 1} of the record are not the masks "
                                     f"this search proposes there: a record of another search, settings or seed")
                if taken < len(batch):
                    return self._within_budget(batch[taken:], position + len(batch)), None
                position += taken
                batch = plan.send(scores[position - taken:position])
        except StopIteration as done:
            if position != len(masks):
                raise ValueError(f"the record holds {len(masks)} masks but the search ended after {position}")
            return None, done.value

    def _within_budget(self, pending: np.ndarray, total: int) -> np.ndarray:
        if total > self.budget:  # a bug in a plan, never the user's doing
            raise RuntimeError(f"{type(self).__name__} proposed {total} masks, over its budget of {self.budget}")
        return pending

    def _checked(self, masks, scores) -> tuple[np.ndarray, np.ndarray]:
        masks = np.asarray(masks, dtype=np.int8).reshape(-1, self.n_heads)
        scores = np.asarray(scores, dtype=float).reshape(-1)
        if len(masks) != len(scores):
            raise ValueError(f"the record has {len(masks)} masks but {len(scores)} scores")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"the record's scores must be finite numbers, got {scores[~np.isfinite(scores)][:3]}")
        return masks, scores
