"""Each head's evidence: its effect's 95 % interval and its probability of staying in the top k, both
from resampling the identification documents, and whether it is found above the noise.

A search scores head sets (masks) on a few documents; its per-head values are functions of those
scores (a difference of two sets' scores, a Lasso fit of many). Scores are means over documents, so
a second draw of documents is simulated by reweighting the documents each set was scored on
(:func:`replicates`, a bootstrap: the per-document scores are kept, nothing is scored again) and
recomputing the values from the reweighted scores.

**Found.** A head is found where its effect is damage (below 0) by more than the noise of its own
measurement: ``value / sd < -z``, ``sd`` its spread over the replicates, ``z`` the one-sided 95 %
normal quantile corrected for the number ``m`` of heads assessed (Bonferroni: ``z = Phi^-1(1 -
0.05 / m)``, 3.6 for 270 heads), so that a search that looked at many heads does not find one by
chance. **Nothing found** is an answer, with its reason: the scores do not vary over the head
sets scored, the unablated model is at the metric's floor on every document (nothing to damage),
or no head clears the noise. **The noise floor** reported beside it is the half-width of the
unablated score's 95 % interval under the same resampling (the design's mean score where the
design holds no unablated row): how far a second draw of documents moves the score itself.

Each head's ``status`` says where its value comes from: ``measured`` (a difference of two scored
head sets), ``estimated`` (a fit of many, a gradient, a group's drop) or ``unmeasured`` (the
search never scored it; its value is a placeholder and it ranks below every other head).

>>> rng = np.random.default_rng(0)
>>> per_doc = np.vstack([np.ones(40), 0.5 + 0.1 * rng.standard_normal(40), 1 + 0.1 * rng.standard_normal(40)])
>>> found = assess(np.array([-0.5, 0.0]), ["measured", "measured"], per_doc,
...                contrast({0: (1, 0), 1: (2, 0)}, np.array([-0.5, 0.0])), baseline_row=0, top_k=1, seed=0)
>>> found.found, found.p_top_k.tolist(), bool(found.low[0] < -0.5 < found.high[0])
((0,), [1.0, 0.0], True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


N_BOOT = 200  # resamples of the documents: 200 settle a 95 % interval's ends to about 0.01 of its width
LEVEL = 0.95
STATUSES = ("measured", "estimated", "unmeasured")


@dataclass(frozen=True)
class Evidence:
    """The evidence of one search, one entry per head (flat indices) in each array.

    low, high: the 95 % interval of each head's value (NaN: none, e.g. an unmeasured head, or no
    per-document scores). p_top_k: the share of document resamples in which the head is among the
    k most damaging (below 0; NaN where it has no interval). status: measured, estimated or
    unmeasured. found: the heads above the noise, most damaging first; None where nothing could be
    assessed (``reason`` says why). noise: the noise floor (module docstring), None without
    per-document scores. reason: why nothing was found or assessed, empty when a head was found.
    z: the threshold a head's value over its spread must pass; n_docs: the documents resampled.
    """

    low: np.ndarray
    high: np.ndarray
    p_top_k: np.ndarray
    status: tuple[str, ...]
    found: tuple[int, ...] | None
    noise: float | None
    reason: str
    z: float | None
    n_docs: int
    n_boot: int = N_BOOT

    def fields(self, names: Sequence[str], coef: Sequence[float]) -> dict:
        """recovery.json's evidence fields, heads by name; ``reason`` completed with the largest drop
        when no head cleared the noise."""
        interval = {name: None if np.isnan(lo) else [float(lo), float(hi)]
                    for name, lo, hi in zip(names, self.low, self.high)}
        return {
            "found": None if self.found is None else [names[h] for h in self.found],
            "no_head_found": reason_words(self.reason, names, coef, self.low, self.high),
            "noise_floor": self.noise,
            "interval": interval,
            "p_top_k": {name: None if np.isnan(p) else float(p) for name, p in zip(names, self.p_top_k)},
            "status": dict(zip(names, self.status)),
            "evidence": {"level": LEVEL, "resamples": self.n_boot, "documents": self.n_docs, "z": self.z},
        }


def contrast(pairs: Mapping[int, tuple[int, int]], coef: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The values of a search whose heads' values are differences of two scored sets: ``pairs``
    maps a head to (the row of the set with it ablated, the row without); every other head keeps
    its value in ``coef``."""
    heads = np.array(sorted(pairs), dtype=int)
    with_rows = np.array([pairs[h][0] for h in heads], dtype=int)
    without = np.array([pairs[h][1] for h in heads], dtype=int)

    def values(y: np.ndarray) -> np.ndarray:
        found = np.array(coef, dtype=float)
        if len(heads):
            found[heads] = y[with_rows] - y[without]
        return found

    return values


def replicates(per_doc: np.ndarray, values: Callable[[np.ndarray], np.ndarray], *, seed: int,
               n_boot: int = N_BOOT) -> tuple[np.ndarray, np.ndarray]:
    """The scores (n_boot x sets) and values (n_boot x heads) of ``n_boot`` resamples of the
    documents (columns of ``per_doc``, drawn with replacement, the same draw for every set)."""
    n_docs = per_doc.shape[1]
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_docs, np.full(n_docs, 1 / n_docs), size=n_boot) / n_docs
    scores = weights @ per_doc.T
    return scores, np.vstack([values(y) for y in scores])


def threshold(m: int) -> float:
    """The one-sided 95 % normal quantile corrected for ``m`` heads assessed (Bonferroni)."""
    return float(NormalDist().inv_cdf(1 - (1 - LEVEL) / max(m, 1)))


def assess(coef, status: Sequence[str], per_doc, values, *, baseline_row: int | None, top_k: int, seed: int,
           n_boot: int = N_BOOT) -> Evidence:
    """The evidence of a search (module docstring): ``coef`` its per-head values (oriented: below 0
    is damage), ``status`` each head's, ``per_doc`` the per-document scores of every set it scored
    (oriented, sets x documents; None: no interval, nothing assessed), ``values(y)`` its values
    recomputed from the sets' scores ``y`` (:func:`contrast`, or a refit), ``baseline_row`` the
    unablated set's row (None: the design has none)."""
    coef = np.asarray(coef, dtype=float)
    n_heads = len(coef)
    bad = sorted(set(status) - set(STATUSES))
    if len(status) != n_heads or bad:
        raise ValueError(f"status must give one of {STATUSES} per head ({n_heads}), got {len(status)} with {bad}")
    nan = np.full(n_heads, np.nan)
    if per_doc is None:
        return Evidence(nan, nan.copy(), nan.copy(), tuple(status), None, None,
                        "not assessed: the scores are not means over documents (a callable task's one "
                        "number, or an aggregate metric), so they cannot be resampled", None, 0, n_boot)
    per_doc = np.asarray(per_doc, dtype=float)
    y = per_doc.mean(axis=1)
    scores, draws = replicates(per_doc, values, seed=seed, n_boot=n_boot)
    base = scores[:, baseline_row] if baseline_row is not None else scores.mean(axis=1)
    noise = float(NormalDist().inv_cdf(0.5 + LEVEL / 2) * base.std(ddof=1)) if n_boot > 1 else 0.0
    assessed = np.array([s != "unmeasured" for s in status]) & (np.ptp(draws, axis=0) > 0)
    low, high = nan.copy(), nan.copy()
    tail = (1 - LEVEL) / 2
    low[assessed] = np.quantile(draws[:, assessed], tail, axis=0)
    high[assessed] = np.quantile(draws[:, assessed], 1 - tail, axis=0)
    p_top_k = np.where(assessed, in_top_k(draws, top_k), np.nan)
    z = threshold(int(assessed.sum()))
    spread = draws.std(axis=0, ddof=1)
    clears = assessed & (coef < 0) & (coef < -z * spread)
    found = tuple(int(h) for h in sorted(np.flatnonzero(clears), key=lambda h: (coef[h], h)))
    reason = ""
    if np.ptp(y) == 0:
        reason, found = f"the scores do not vary over the {len(y)} head sets scored (all {y[0]:.4g})", ()
    elif baseline_row is not None and np.all(per_doc[baseline_row] <= per_doc.min()):
        reason, found = (f"the unablated model scores the floor ({per_doc.min():.4g}) on every one of the "
                         f"{per_doc.shape[1]} documents: there is nothing to damage"), ()
    elif not found:
        reason = "no head's effect clears the noise of its measurement"
    return Evidence(low, high, p_top_k, tuple(status), found, noise, reason, z, per_doc.shape[1], n_boot)


def in_top_k(draws: np.ndarray, k: int) -> np.ndarray:
    """Per head, the share of rows of ``draws`` (replicates x heads) in which it is among the ``k``
    lowest values and below 0 (ties: the lower head index first)."""
    order = np.lexsort((np.broadcast_to(np.arange(draws.shape[1]), draws.shape), draws), axis=1)[:, :k]
    hits = np.zeros(draws.shape, dtype=bool)
    np.put_along_axis(hits, order, True, axis=1)
    return (hits & (draws < 0)).mean(axis=0)


def reason_words(reason: str, names: Sequence[str], coef, low, high) -> str:
    """``reason`` with the largest drop named when it is that no head cleared the noise."""
    if not reason.startswith("no head's effect"):
        return reason
    coef = np.asarray(coef, dtype=float)
    if not np.any(coef < 0):
        return reason + " (no head lowers the score)"
    h = int(np.argmin(coef))
    interval = "" if np.isnan(low[h]) else f", 95 % interval {low[h]:.3g} to {high[h]:.3g}"
    return f"{reason}: the largest drop, {names[h]} {coef[h]:.3g}{interval}, is within it"


def log_evidence(found: Evidence, names: Sequence[str], coef, log) -> None:
    """The evidence in a search's log: the heads found above the noise with their intervals, or why
    none is."""
    if found.found:
        log.info("found above the noise (%d documents resampled %d times, z > %.2f): %s", found.n_docs,
                 found.n_boot, found.z, ", ".join(f"{names[h]} {coef[h]:.3g} [{found.low[h]:.3g}, {found.high[h]:.3g}]"
                                                   for h in found.found))
    elif found.found is None:  # nothing could be measured against the noise: not the same as nothing found
        log.warning("heads %s", found.reason)
    else:
        log.warning("no head found above noise: %s", reason_words(found.reason, names, coef, found.low, found.high))


def not_assessed(names: Sequence[str], status: str, reason: str) -> dict:
    """recovery.json's evidence fields of a search whose heads cannot be assessed (every head of one
    ``status``; ``reason``: why, after "not assessed: ")."""
    nan = np.full(len(names), np.nan)
    found = Evidence(nan, nan.copy(), nan.copy(), (status,) * len(names), None, None, f"not assessed: {reason}",
                     None, 0, 0)
    return found.fields(names, nan)


def head_evidence(record: Mapping, head: str, *, value_digits: int = 3,
                  interval_digits: int = 3) -> tuple[str, str | None, str | None]:
    """A head's value in a recovery record, its 95 % interval and its P(in the top k) as text, as
    every reader shows them: (``"-1.98"``, ``"[-2.31, -1.62]"``, ``"0.97"``); ``"-"`` for a head
    without a value, None for a missing interval or P. Values to ``value_digits`` significant
    digits, the interval's ends to ``interval_digits`` (``+ 0.0``: a Lasso's -0.0 reads as 0).

    >>> head_evidence({"coef": {"L1H5": -1.984}, "interval": {"L1H5": [-2.3149, -1.62]},
    ...                "p_top_k": {"L1H5": 0.971}}, "L1H5")
    ('-1.98', '[-2.31, -1.62]', '0.97')
    >>> head_evidence({"coef": {"L0H0": -0.0}}, "L0H0", value_digits=4)
    ('0', None, None)
    """
    value = record["coef"].get(head)
    interval = (record.get("interval") or {}).get(head)
    p_top_k = (record.get("p_top_k") or {}).get(head)
    ends = None if not interval else (format(end + 0.0, f".{interval_digits}g") for end in interval)
    return ("-" if value is None else format(value + 0.0, f".{value_digits}g"),
            None if ends is None else "[{}, {}]".format(*ends), None if p_top_k is None else f"{p_top_k:.2f}")
