"""The evidence of a search that scored head sets one by one (a record of masks, their scores and
per-document scores): which heads' values are differences of two recorded sets, and so measured,
and the record's per-document scores kept as it grows, for :func:`headloc.search.evidence.assess`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from headloc.search.evidence import Evidence, assess, contrast


def extend_per_doc(per_doc: np.ndarray | None, n_rows: int, new: np.ndarray | None) -> np.ndarray | None:
    """A record's per-document scores (``n_rows`` rows so far) with ``new`` rows appended; None once
    any row has none, or rows disagree on the number of documents."""
    if n_rows == 0:
        return None if new is None else np.asarray(new, dtype=float)
    if per_doc is None or new is None or np.shape(new)[1] != per_doc.shape[1]:
        return None
    return np.vstack([per_doc, new])


def measured_pairs(masks: np.ndarray, y: np.ndarray, coef, wanted: Mapping) -> dict[int, tuple[int, int]]:
    """Of ``wanted`` (head -> (the heads ablated with it, the heads ablated without it)), the heads
    whose value in ``coef`` is the difference of those two rows' scores ``y`` in ``masks``, checked:
    head -> (row with, row without). A head whose sets were not both scored, or whose value is not
    their difference, is left out (its value is then an estimate)."""
    rows: dict[tuple, int] = {}
    for i, row in enumerate(np.asarray(masks)):
        rows.setdefault(tuple(np.flatnonzero(row).tolist()), i)
    pairs = {}
    for head, (with_heads, without_heads) in wanted.items():
        a = rows.get(tuple(sorted(int(h) for h in with_heads)))
        b = rows.get(tuple(sorted(int(h) for h in without_heads)))
        if a is not None and b is not None and np.isclose(y[a] - y[b], coef[head], rtol=1e-9, atol=1e-12):
            pairs[int(head)] = (a, b)
    return pairs


def of_record(masks: np.ndarray, y: np.ndarray, per_doc, coef, wanted: Mapping, *, top_k: int, seed: int) -> Evidence:
    """The evidence of a search that scored head sets one by one (a record of ``masks``, their
    oriented scores ``y`` and per-document scores): the heads of ``wanted`` whose values are
    differences of two recorded sets are measured (:func:`measured_pairs`); every other head that a
    scored set ablated is estimated, the rest unmeasured."""
    coef = np.asarray(coef, dtype=float)
    pairs = measured_pairs(masks, y, coef, wanted)
    ablated = np.asarray(masks).any(axis=0) if len(masks) else np.zeros(len(coef), dtype=bool)
    status = ["measured" if h in pairs else "estimated" if ablated[h] else "unmeasured" for h in range(len(coef))]
    return assess(coef, status, per_doc, contrast(pairs, coef), baseline_row=baseline_row(masks), top_k=top_k,
                  seed=seed)


def baseline_row(masks) -> int | None:
    """The row of the unablated set (no head ablated) in ``masks``, the first if several; None if none."""
    empty = np.flatnonzero(~np.asarray(masks, dtype=bool).any(axis=1)) if len(masks) else []
    return int(empty[0]) if len(empty) else None
