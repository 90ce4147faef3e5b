"""The general text that every head of a planted model is trained on, and its true entropy.

The text is a 4th-order Markov chain whose next-word logits are a sum of one random table per lag,
so predicting it needs heads that look 1-3 positions back. Like the task documents
(:mod:`headloc.groundtruth.tasks`), it depends only on the design, so every size shares it.
"""

from __future__ import annotations

import numpy as np

from headloc.groundtruth.design import Design
from headloc.groundtruth.tasks import token_ids, words


def markov_tables(design: Design) -> np.ndarray:
    """[order, words, words] logit tables: lag j's table maps the word j-1 positions back to logits."""
    rng = np.random.default_rng([design.seed, 77])
    order, scale = int(design.text["order"]), float(design.text["scale"])
    return rng.normal(0.0, scale, size=(order, design.words, design.words))


def sample_text(design: Design, tables: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """[rows, length] word indices (0-based among the content words) from the Markov chain."""
    order, length = tables.shape[0], int(design.text["length"])
    out = np.empty((rows, length), dtype=np.int64)
    out[:, :order] = rng.integers(0, design.words, size=(rows, order))
    for t in range(order, length):
        logits = sum(tables[j][out[:, t - 1 - j]] for j in range(order))
        gumbel = -np.log(-np.log(rng.random(logits.shape)))
        out[:, t] = np.argmax(logits + gumbel, axis=1)
    return out


def text_token_ids(design: Design, word_indices: np.ndarray) -> np.ndarray:
    """Token ids of text rows (word indices), after "<s>" when the design starts every row with it."""
    ids = token_ids(design)
    out = word_indices + ids[words(design)[0]]
    if design.bos:
        out = np.concatenate([np.full((len(out), 1), ids["<s>"], dtype=out.dtype), out], axis=1)
    return out


def text_entropy(design: Design, tables: np.ndarray, rows: np.ndarray) -> float:
    """Mean true next-word entropy (nats) over the predicted positions of ``rows`` (word indices)."""
    order = tables.shape[0]
    total, count = 0.0, 0
    for t in range(order, rows.shape[1]):
        logits = sum(tables[j][rows[:, t - 1 - j]] for j in range(order))
        logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        total += float(-(np.exp(logp) * logp).sum(axis=1).sum())
        count += rows.shape[0]
    return total / count


def eval_text(design: Design, rows: int = 64) -> np.ndarray:
    """A fixed held-out set of text rows (token ids) for the truth's text loss."""
    rng = np.random.default_rng([design.seed, 99])
    return text_token_ids(design, sample_text(design, markov_tables(design), rows, rng))
