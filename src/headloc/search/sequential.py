"""Sequential searches: the masks of the next round depend on the scores of the last ones.

A sequential search is a frozen settings object (:class:`SequentialSearch`: heads, n_masks, seed,
options) whose methods are pure functions of **the record**, the masks scored so far and their
scores, in the order they were scored:

- ``masks``: an ``(M, N)`` int8 array, ``masks[i, j] = 1`` when head ``j`` is ablated in row ``i``;
- ``scores``: ``(M,)`` floats, oriented so that higher is better.

Row 0 is always the all-zero mask: the unablated baseline is part of the record and counts as one
evaluation. Every search needs it (its per-head values are score changes from it, the damage
reward of Thompson sampling is a drop from it), and a scoring job that writes it to the record
like any other mask needs no second kind of file.

:meth:`SequentialSearch.resume` replays the search from the start on a record, feeding it the
record's scores, and keeps it running (:class:`Live`): ``pending`` is the next round (masks that can
share forward passes), or None when the search is done and ``found`` holds its :class:`Recovery`;
``advance(scores)`` feeds a round's scores and moves on, so a job replays once, whatever its number
of rounds. A job can thus be killed at any point, reload its record and go on: a round cut short
leaves only its masks not yet scored pending, in the same order, and no mask is ever proposed twice
(the search answers a mask it has scored from memory). The same settings and record always give the
same masks: all randomness comes from ``seed``. A record must therefore be appended in the order the
masks were proposed. :meth:`SequentialSearch.next_masks` and :meth:`SequentialSearch.recover` are
the one-shot forms (one replay each).

A search is written as a generator, :meth:`SequentialSearch.propose`: it yields each round's masks
(through :meth:`Memory.measure`), receives their scores, and returns its :class:`Recovery`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

Proposals = Generator[np.ndarray, np.ndarray, "Recovery"]  # yields rounds of masks, returns the Recovery


@dataclass(frozen=True)
class Recovery:
    """What a finished sequential search found, in flat head indices.

    ranking: every head, most damaging first. coef: each head's value for the heatmap (what it is
    says ``labels``, one short phrase per head). n_evals: masks scored (the baseline row included).
    baseline: the unablated score. details: what only this search knows (JSON-ready values);
    ``head_keys`` names the details that hold head indices (a list of them) and ``per_head_keys``
    those that hold one value per head, so that recovery.json can write them with head names.
    confirmed: the heads the search ablated alone and accepted, in the order accepted; None for a
    search that confirms no head alone (its ranking is all estimate). stop: why a confirming
    search stopped when it had not confirmed every head it wanted ("at its cap of 25
    evaluations"); empty when it had.
    """

    ranking: np.ndarray
    coef: np.ndarray
    labels: tuple[str, ...]
    n_evals: int
    baseline: float
    details: Mapping = field(default_factory=dict)
    head_keys: tuple[str, ...] = ()
    per_head_keys: tuple[str, ...] = ()
    confirmed: tuple[int, ...] | None = None
    stop: str = ""

    def named_details(self, names) -> dict:
        """``details`` with head indices as ``names`` (a list of heads; a dict head -> value)."""
        named = dict(self.details)
        for key in self.head_keys:
            named[key] = [names[int(i)] for i in named[key]]
        for key in self.per_head_keys:
            named[key] = {name: value for name, value in zip(names, named[key], strict=True)}
        return named

    def warnings(self, names, k: int, search: str) -> list[str]:
        """What a reader of the top ``k`` must know, in words (recovery.json's ``warnings``): a
        confirming search's top k holding heads it did not confirm, with why it stopped and how
        each such head was measured (its label); empty for a complete or non-confirming search."""
        if self.confirmed is None:
            return []
        top = [int(h) for h in self.ranking[:k]]
        unconfirmed = [h for h in top if h not in self.confirmed]
        if not unconfirmed:
            return []
        heads = ", ".join(f"{names[h]} ({self.labels[h]})" for h in unconfirmed)
        return [f"{search} stopped {self.stop or 'early'}, with {len(top) - len(unconfirmed)} of its top {len(top)} "
                f"heads confirmed; not confirmed: {heads}: each is known only by the drop of the smallest set "
                "measured that holds it (its label)"]


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


def check_positive_int(name: str, value, least: int = 1, meaning: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}{f' ({meaning})' if meaning else ''}, got {value!r}")
    return int(value)


def check_choice(name: str, value, valid: tuple) -> None:
    if value not in valid:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, valid))}, got {value!r}")


@dataclass(frozen=True)
class SequentialSearch:
    """The record -> next masks interface every sequential search shares (see the module docstring).

    Subclasses add their options as fields, check them in ``__post_init__`` and write :meth:`propose`.
    """

    n_heads: int
    n_masks: int  # the most masks it scores, the unablated row included
    seed: int = 0

    def __post_init__(self):
        check_positive_int("n_heads", self.n_heads)
        check_positive_int("n_masks", self.n_masks, least=2)  # the baseline and one mask

    def propose(self) -> Proposals:
        raise NotImplementedError

    def resume(self, masks, scores) -> "Live":
        """The search replayed on a record (masks, oriented scores) and kept running."""
        return Live(self, *self._checked(masks, scores))

    def next_masks(self, masks, scores) -> np.ndarray | None:
        """The masks to score next (a round, or what is left of it), or None when the search is done."""
        return self.resume(masks, scores).pending

    def recover(self, masks, scores) -> Recovery:
        """The result of a finished record (ValueError if the search would still score masks)."""
        live = self.resume(masks, scores)
        if live.pending is not None:
            raise ValueError(f"the record of {len(scores)} masks is unfinished: {len(live.pending)} more to score")
        return live.found

    def complete(self, score: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray, Recovery]:
        """The whole search in-process: ``score(masks) -> scores`` for each round. Returns the
        record (masks, scores) and the recovery, as a job that was never interrupted would."""
        live, rows, values = self.resume(np.zeros((0, self.n_heads)), []), [], []
        while live.pending is not None:
            rows.append(live.pending)
            values.append(np.asarray(score(live.pending), dtype=float))
            live.advance(values[-1])
        return np.vstack(rows), np.concatenate(values), live.found

    def _checked(self, masks, scores) -> tuple[np.ndarray, np.ndarray]:
        masks = np.asarray(masks, dtype=np.int8).reshape(-1, self.n_heads)
        scores = np.asarray(scores, dtype=float).reshape(-1)
        if len(masks) != len(scores):
            raise ValueError(f"the record has {len(masks)} masks but {len(scores)} scores")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"the record's scores must be finite numbers, got {scores[~np.isfinite(scores)][:3]}")
        return masks, scores


class Live:
    """A search replayed on its record and kept running (:meth:`SequentialSearch.resume`).

    ``pending``: the masks to score next (what is left of a round cut short, or the next round), or
    None when the search is done; then ``found`` is its :class:`Recovery`. :meth:`advance` takes the
    pending masks' scores (oriented: higher is better).
    """

    def __init__(self, search: SequentialSearch, masks: np.ndarray, scores: np.ndarray):
        self.search, self.proposals = search, search.propose()
        self.pending: np.ndarray | None = None
        self.found: Recovery | None = None
        self.scored = np.zeros(0)  # the scores of the pending round's masks already in the record
        self.proposed = 0  # masks proposed so far, the pending ones included
        position = 0
        try:
            batch = next(self.proposals)
            while True:
                taken = min(len(batch), len(masks) - position)
                if not np.array_equal(masks[position:position + taken], batch[:taken]):
                    raise ValueError(f"rows {position}..{position + taken - 1} of the record are not the masks "
                                     f"this search proposes there: a record of another search, settings or seed")
                if taken < len(batch):
                    self.scored = scores[position:position + taken]
                    self._propose(batch[taken:], position + len(batch))
                    return
                position += taken
                batch = self.proposals.send(scores[position - taken:position])
        except StopIteration as done:
            if position != len(masks):
                raise ValueError(f"the record holds {len(masks)} masks but the search ended after {position}")
            self.found = done.value

    def advance(self, scores) -> None:
        """Feed the pending masks' scores; the next round becomes pending, or the search ends."""
        if self.pending is None:
            raise ValueError("the search is done: no masks are pending")
        scores = np.asarray(scores, dtype=float).reshape(-1)
        if len(scores) != len(self.pending):
            raise ValueError(f"{len(scores)} scores for {len(self.pending)} pending masks")
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"scores must be finite numbers, got {scores[~np.isfinite(scores)][:3]}")
        batch_scores, self.scored, self.pending = np.concatenate([self.scored, scores]), np.zeros(0), None
        try:
            batch = self.proposals.send(batch_scores)
        except StopIteration as done:
            self.found = done.value
            return
        self._propose(batch, self.proposed + len(batch))

    def _propose(self, pending: np.ndarray, total: int) -> None:
        n_masks = self.search.n_masks
        if total > n_masks:  # a bug in a search, never the user's doing
            raise RuntimeError(f"{type(self.search).__name__} proposed {total} masks, over its n_masks of {n_masks}")
        self.pending, self.proposed = pending, total
