"""What ablating a head set costs each task, measured on its full data (rule single_head_damage):
a drop with its 95 % interval from the paired per-document values, a step's drop beside the heads
ranked above it, and each task's scale, what a drop is a share of (headloc.workflow.universal
decides from these which heads are universal)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from headloc.data.units import IN_PERCENT
from headloc.heads import NO_HEADS, format_headset

Z95 = 1.96


class SetScore(NamedTuple):
    """One task's score with a head set ablated, and its per-document values (None without them):
    what :class:`headloc.engine.evaluation.MaskResult` holds, whose ``score`` and ``per_doc`` the
    rule reads as they are."""

    score: float
    per_doc: Sequence[float] | None


def head_damage(baseline: float, value: float, baseline_docs, docs, higher_is_better: bool) -> dict:
    """One head's damage to one task: its score ``value`` against the score before it, ``baseline``
    (the unablated model's, or the heads' above it), the drop in the metric's better direction, and
    the drop's 95 % interval from the paired per-document values (``low``/``high`` None without them).

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


def step_damage(before: Mapping[str, SetScore], after: Mapping[str, SetScore], tasks: Mapping[str, Mapping]) -> dict:
    """The damage of going from head set ``before`` to ``after`` on every task (:func:`head_damage`)."""
    return {task: head_damage(before[task].score, after[task].score, before[task].per_doc, after[task].per_doc,
                              tasks[task]["higher_is_better"]) for task in tasks}


def context_steps(lists: Mapping[str, Sequence[str]], scores: Mapping[str, Mapping[str, SetScore]],
                  tasks: Mapping[str, Mapping]) -> list[dict]:
    """Each head of each task's list (its filtered top k) with its damage beside the heads above it
    (``damage``) and the damage of the set it completes (``set_damage``, from the unablated model),
    for the lists whose cumulative sets are all in ``scores`` (head set -> task -> SetScore; ``none``
    the unablated model)."""
    steps = []
    for task, heads in lists.items():
        names = [format_headset(heads[:i]) for i in range(len(heads) + 1)]
        if all(name in scores for name in names):
            steps += [{"task": task, "head": head, "beside": names[i],
                       "damage": step_damage(scores[names[i]], scores[names[i + 1]], tasks),
                       "set_damage": step_damage(scores[NO_HEADS], scores[names[i + 1]], tasks)}
                      for i, head in enumerate(heads)]
    return steps


def task_scales(tasks: Mapping[str, Mapping], scores: Mapping[str, Mapping[str, SetScore]],
                rankings: Mapping[str, Sequence[str]], k: int) -> dict[str, float]:
    """What ``min_drop`` is a share of, per task (headloc.workflow.universal says why): the
    unablated score's size for a task shown in percent (``unit`` in
    :data:`headloc.data.units.IN_PERCENT`), else the size of the drop of its own unfiltered top
    ``k`` (in ``scores``: head set -> task -> SetScore; ``none`` unablated).

    >>> tasks = {"acc": {"unit": "points", "baseline": 0.8}, "ll": {"unit": "own", "baseline": -0.3}}
    >>> scores = {"none": {"ll": SetScore(-0.3, None)}, "L0H1+L0H2": {"ll": SetScore(-5.3, None)}}
    >>> task_scales(tasks, scores, {"acc": ["L1H0"], "ll": ["L0H1", "L0H2", "L3H3"]}, k=2)
    {'acc': 0.8, 'll': 5.0}
    """
    return {task: abs(facts["baseline"]) if facts["unit"] in IN_PERCENT
            else abs(scores[NO_HEADS][task].score - scores[format_headset(rankings[task][:k])][task].score)
            for task, facts in tasks.items()}
