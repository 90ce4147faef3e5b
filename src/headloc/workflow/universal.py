"""Universal heads from measured damage (``universal.detect: damage``, the default): a head is
universal when ablating it alone degrades tasks of at least ``min_capabilities`` distinct
capabilities, each measured on the task's full data (its validation metric, as the tables show it).

A head *degrades* a task when its drop (the unablated score less the score with the head ablated,
in the metric's better direction) is at least ``min_drop`` of the unablated score and above the
noise: the 95 % interval of the drop over the task's documents (the mean of the paired
per-document differences, +- 1.96 standard errors) lies above zero. A task whose metric has no
per-document values (a perplexity) gives the drop without an interval, and then the share alone
decides.

Which heads are measured: every task's top ``top_n`` (the heads the paper's overlap rule looks at)
and the heads its filtered top ``k`` would report once the universal heads found so far are left
out, measured in rounds until every task's filtered top k is measured (:func:`measure_heads`), so
that every head a table reports as task-specific has been checked. The paper's own rule (a head in
the top_n of tasks of several capabilities) is ``universal.detect: ranking``
(:func:`headloc.workflow.selection.universal_heads`).

>>> tasks = {"gsm8k": {"baseline": 0.5}, "mbpp": {"baseline": 0.4}}
>>> drops = {"L1H2": {"gsm8k": {"drop": 0.2, "low": 0.1}, "mbpp": {"drop": 0.1, "low": 0.02}},
...          "L3H0": {"gsm8k": {"drop": 0.3, "low": 0.2}, "mbpp": {"drop": 0.01, "low": -0.03}}}
>>> universal_by_damage(drops, tasks, {"gsm8k": "math", "mbpp": "code"}, min_drop=0.1, min_capabilities=2)
{'L1H2': ['gsm8k', 'mbpp']}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from headloc.heads import parse_head
from headloc.workflow.selection import task_heads

Z95 = 1.96
# the universal section's keys the measurement reads: rule single_head_damage's params hold these
# alone, so that another key (filter, detect's other settings) does not measure every head again
DAMAGE_KEYS = ("top_n", "min_drop", "min_capabilities")


def damage_rule(universal: Mapping) -> dict:
    """The part of the ``universal`` config section that decides which heads are measured alone and
    which of them are universal."""
    return {key: universal[key] for key in DAMAGE_KEYS}


def head_damage(baseline: float, value: float, baseline_docs, docs, higher_is_better: bool) -> dict:
    """One head's damage to one task: its score ``value`` against the unablated ``baseline``, the
    drop in the metric's better direction, and the drop's 95 % interval from the paired
    per-document values (``low``/``high`` None without them).

    >>> found = head_damage(0.75, 0.25, [1, 1, 0, 1], [0, 1, 0, 0], True)  # paired drops 1, 0, 0, 1
    >>> found["drop"], round(found["low"], 3), round(found["high"], 3)  # 0.5 +- 1.96 x 0.577 / 2
    (0.5, -0.066, 1.066)
    """
    sign = 1.0 if higher_is_better else -1.0
    found = {"value": float(value), "drop": sign * (float(baseline) - float(value)), "low": None, "high": None}
    if baseline_docs is not None and docs is not None and len(baseline_docs) == len(docs) > 1:
        paired = sign * (np.asarray(baseline_docs, dtype=float) - np.asarray(docs, dtype=float))
        half = Z95 * paired.std(ddof=1) / np.sqrt(len(paired))
        found["low"], found["high"] = float(paired.mean() - half), float(paired.mean() + half)
    return found


def degraded_tasks(damage: Mapping[str, Mapping], tasks: Mapping[str, Mapping], *, min_drop: float) -> list[str]:
    """The tasks a head degrades (see the module docstring), from its damage per task."""
    return [task for task, found in damage.items()
            if found["drop"] >= min_drop * abs(tasks[task]["baseline"]) and found["drop"] > 0
            and (found.get("low") is None or found["low"] > 0)]


def universal_by_damage(damage: Mapping[str, Mapping[str, Mapping]], tasks: Mapping[str, Mapping],
                        capabilities: Mapping[str, str], *, min_drop: float,
                        min_capabilities: int) -> dict[str, list[str]]:
    """The measured heads that degrade tasks of at least ``min_capabilities`` capabilities, each
    with the tasks it degrades, ordered by (layer, head)."""
    found = {}
    for head, per_task in damage.items():
        degraded = degraded_tasks(per_task, tasks, min_drop=min_drop)
        if len({capabilities[task] for task in degraded}) >= min_capabilities:
            found[head] = degraded
    return dict(sorted(found.items(), key=lambda item: parse_head(item[0])))


def measure_heads(evaluate: Callable[[list[str]], dict], rankings: Mapping[str, Sequence[str]],
                  tasks: Mapping[str, Mapping], capabilities: Mapping[str, str], *, top_n: int, k: int,
                  min_drop: float, min_capabilities: int, log=None) -> tuple[dict, dict]:
    """Measure heads alone until every task's filtered top ``k`` is measured (module docstring):
    ``evaluate(heads) -> {head: {task: damage}}`` (:func:`head_damage` per task) measures a round.
    Returns the damage of every measured head and the universal heads among them."""
    damage: dict[str, dict] = {}
    while True:
        universal = universal_by_damage(damage, tasks, capabilities, min_drop=min_drop,
                                        min_capabilities=min_capabilities)
        wanted = []
        for ranking in rankings.values():
            wanted += list(ranking[:top_n]) + task_heads(ranking, k, exclude=universal)
        new = list(dict.fromkeys(head for head in wanted if head not in damage))
        if not new:
            return damage, universal
        if log is not None:
            log.info("measuring %d heads alone on %d tasks: %s", len(new), len(tasks), ", ".join(new))
        damage.update(evaluate(new))
