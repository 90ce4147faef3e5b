"""Where a constructed model's task features sit in its residual stream, and each token's share of them.

The task dims follow the ``size.hidden`` text dims (:class:`Layout`); each token's embedding holds its
fixed features there (:func:`token_features`), a word's code among them (:func:`word_codes`). What
reads and writes them is :mod:`headloc.groundtruth.construct`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.recipe import Recipe

CODE = 8  # dims of a word's code (one head's value width: head_dim must be at least this)


@dataclass(frozen=True)
class Layout:
    """Where each task feature sits in the residual stream: dims ``text`` onwards."""

    text: int
    tasks: tuple[str, ...]
    queries: tuple[int, ...]
    flags: tuple[str, ...] = ()  # interaction roles: one flag dim each, from the first head to the second
    code_dims: int = CODE  # the code dims a word's code uses (code_dims(design))

    def __post_init__(self):
        if len(self.tasks) > CODE:
            raise ValueError(f"the universal head carries at most {CODE} task markers; the design has {len(self.tasks)}")

    @property
    def const(self) -> int:
        return self.text

    @property
    def bos(self) -> int:
        return self.text + 1

    @property
    def content(self) -> int:
        return self.text + 2

    @property
    def any_marker(self) -> int:
        return self.text + 3

    def marker(self, task: str) -> int:
        return self.text + 4 + self.tasks.index(task)

    def query(self, q: int) -> int:
        return self.text + 4 + len(self.tasks) + self.queries.index(q)

    @property
    def code(self) -> slice:
        start = self.text + 4 + len(self.tasks) + len(self.queries)
        return slice(start, start + CODE)

    def slot(self, task: str) -> int:
        return self.code.stop + self.tasks.index(task)

    @property
    def answer(self) -> slice:
        start = self.code.stop + len(self.tasks)
        return slice(start, start + CODE)

    def flag(self, role: str) -> int:
        return self.answer.stop + self.flags.index(role)

    @property
    def width(self) -> int:
        return self.answer.stop + len(self.flags)


def layout_of(recipe: Recipe) -> Layout:
    design = recipe.design
    return Layout(text=recipe.size.hidden, tasks=tuple(design.tasks), queries=tuple(design.queries),
                  flags=tuple(role for role in design.roles if role in design.interactions),
                  code_dims=code_dims(design))


def code_dims(design) -> int:
    """The dims a word's code uses: ``CODE``, or ``CODE - 1`` where interactions need the last value
    dim of a head for their flag."""
    return CODE - 1 if design.interactions else CODE


def word_codes(design, seed: int, trials: int = 200) -> np.ndarray:
    """[words, CODE] unit codes in the first :func:`code_dims` dims: orthogonal within each part of the
    words (a document's gold and its gap distractors come from one part), and of low coherence
    across parts (the best of ``trials`` seeded draws), so that a role head's gold leads every other
    choice."""
    parts = T.pools(design)
    index = {w: i for i, w in enumerate(T.words(design))}
    rng = np.random.default_rng([design.seed, seed, 17])
    dims = code_dims(design)
    best, best_coherence = None, np.inf
    for _ in range(trials):
        codes = np.zeros((design.words, CODE))
        for part in parts:
            if len(part) > dims:
                raise ValueError(f"a part of {len(part)} words cannot have orthogonal {dims}-dim codes")
            q, _ = np.linalg.qr(rng.normal(size=(dims, len(part))))
            codes[[index[w] for w in part], :dims] = q.T
        coherence = np.abs(codes @ codes.T - np.eye(design.words)).max()
        if coherence < best_coherence:
            best, best_coherence = codes, coherence
    return best


def token_features(recipe: Recipe, layout: Layout, const: float) -> torch.Tensor:
    """[vocab, task width] the task dims of each token's embedding (fixed, never trained)."""
    design = recipe.design
    ids = T.token_ids(design)
    features = torch.zeros(len(ids), layout.width - layout.text)
    at = lambda dim: dim - layout.text  # noqa: E731
    features[:, at(layout.const)] = const
    features[ids["<s>"], at(layout.bos)] = 1.0
    codes = torch.tensor(word_codes(design, recipe.size.seed), dtype=torch.float32)
    for i, word in enumerate(T.words(design)):
        features[ids[word], at(layout.content)] = 1.0
        features[ids[word], at(layout.code.start):at(layout.code.stop)] = codes[i]
    for task in design.tasks:
        features[ids[task], at(layout.any_marker)] = 1.0
        features[ids[task], at(layout.marker(task))] = 1.0
    for q in design.queries:
        features[ids[T.query_token(q)], at(layout.query(q))] = 1.0
    return features
