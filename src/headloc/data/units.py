"""How a task's scores are shown, decided in one place for the workflow's tables, ``Located.validate``
and the benchmark comparisons: ``points`` (a fraction in [0, 1] shown in percent, its changes in
percentage points), ``relative`` (percent of the unablated score, for a task the config names
relative) or ``own`` (the metric's own unit: a perplexity, a log-likelihood in nats).

>>> display_unit("acc,none"), display_unit("loglik,none"), display_unit("profane_words", relative=True)
('points', 'own', 'relative')
>>> change(0.5, 0.75, "points"), change(6.0, 8.0, "relative"), change(-2.5, -0.5, "own")
(-25.0, -25.0, -2.0)
"""

from __future__ import annotations

import math

UNITS = ("points", "relative", "own")
IN_PERCENT = ("points", "relative")  # shown in percent of the score: the score's own size is its scale
# lm-eval's metrics that are a share of documents (a mean of 0/1 outcomes) or a proportion:
# their values lie in [0, 1], so a change is shown in percentage points. Any other metric
# (perplexity, bits per byte, BLEU on 0-100, a log-likelihood, a margin) is shown in its own unit.
FRACTION_METRICS = frozenset({"acc", "acc_norm", "acc_mutual_info", "acc_bytes", "exact_match", "pass_at_1",
                              "pass@1", "f1"})


def is_fraction(metric: str) -> bool:
    """Whether ``metric`` (``name`` or ``name,filter``) is one of :data:`FRACTION_METRICS`."""
    return metric.split(",")[0] in FRACTION_METRICS


def display_unit(metric: str, *, relative: bool = False) -> str:
    """The unit a task's scores are shown in: ``relative`` where asked, else ``points`` for a
    fraction metric and the metric's ``own`` unit otherwise."""
    return "relative" if relative else "points" if is_fraction(metric) else "own"


def display_score(value: float, baseline: float, unit: str) -> float:
    """A score in display units: ``points``, a fraction in [0, 1], in percent (its changes are
    percentage points); ``relative``, percent of the baseline (NaN if the baseline is 0); ``own``,
    the metric's own unit (a perplexity), unchanged.

    >>> display_score(0.25, 0.9, "points"), display_score(6.0, 8.0, "relative"), display_score(431.8, 431.8, "own")
    (25.0, 75.0, 431.8)
    """
    if unit == "relative":
        return 100.0 * value / baseline if baseline else math.nan
    if unit == "own":
        return value
    if unit != "points":
        raise ValueError(f"unknown display unit {unit!r}; expected one of {', '.join(UNITS)}")
    if not 0.0 <= value <= 1.0:  # a percentage-point change of a non-fraction would be nonsense
        raise ValueError(f"score {value!r} is not a fraction in [0, 1], so it cannot be shown in percentage "
                         "points; its metric is not one of headloc.data.units.FRACTION_METRICS")
    return 100.0 * value


def change(value: float, baseline: float, unit: str) -> float:
    """The change from ``baseline`` to ``value`` as a table shows it in ``unit``."""
    return display_score(value, baseline, unit) - display_score(baseline, baseline, unit)
