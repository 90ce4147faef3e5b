"""Universal heads from measured damage (``universal.detect: damage``, the default): a head is
universal when ablating it degrades tasks of at least ``min_capabilities`` distinct capabilities,
each measured on the task's full data (its validation metric, as the tables show it).

A head *degrades* a task when its drop (the score before less the score after ablating it, in the
metric's better direction) is at least ``min_drop`` of the task's *scale* and above the noise: the
95 % interval of the drop over the task's documents (the mean of the paired per-document
differences, +- 1.96 standard errors) lies above zero. A task whose metric has no per-document
values (a perplexity) gives the drop without an interval, and then the share alone decides. The
scale (:func:`headloc.workflow.damage.task_scales`) is the task's unablated score where the
tables show the score in percent (a fraction such as accuracy, or a relative task): a tenth of the
score, as the paper counts. A score in its own unit (a log-likelihood, a perplexity) has no such scale (an easy
task's log-likelihood is near 0, and a tenth of it is nothing): its scale is the drop of the
task's own unfiltered top ``k``, what its strongest heads cost it.

A head is measured two ways, and either makes it universal:

* **alone**: every task's top ``top_n`` (the heads the paper's overlap rule looks at) and every
  head a task's filtered top ``k`` reports, ablated alone;
* **in context**: each head of a task's filtered top ``k`` ablated beside the heads ranked above
  it (the validation's cumulative sets, 1..k), its drop the step from the set before it. A head
  that the search put in one task's top k and that, beside the heads above it, degrades a task of
  another capability (its step's drop and the drop of the set it completes both pass) counts both
  capabilities: it is not specific to its task, although alone it may look so (heads that share
  work only show their cost together). Where a whole filtered top k degrades a task of another
  capability though no one step does, the head whose step costs it most counts so, among the
  heads that cost it at least their share of their own task.

Heads are measured in rounds (:func:`measure_heads`): once a head is universal every task's
filtered top k moves past it, and the heads and sets that brings in are measured next, until
every set the tables validate is measured. The paper's own rule (a head in the top_n of tasks of
several capabilities) is ``universal.detect: ranking``
(:func:`headloc.workflow.selection.universal_heads`).

>>> tasks = {"gsm8k": {"baseline": 0.5, "scale": 0.5}, "mbpp": {"baseline": 0.4, "scale": 0.4}}
>>> drops = {"L1H2": {"gsm8k": {"drop": 0.2, "low": 0.1}, "mbpp": {"drop": 0.1, "low": 0.02}},
...          "L3H0": {"gsm8k": {"drop": 0.3, "low": 0.2}, "mbpp": {"drop": 0.01, "low": -0.03}}}
>>> universal_by_damage(drops, tasks, {"gsm8k": "math", "mbpp": "code"}, min_drop=0.1, min_capabilities=2)
{'L1H2': ['gsm8k', 'mbpp']}
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from typing import NamedTuple

from headloc.heads import NO_HEADS, format_headset, parse_head
from headloc.workflow.damage import SetScore, context_steps, step_damage, task_scales
from headloc.workflow.selection import task_heads

# the universal section's keys the measurement reads: rule single_head_damage's params hold these
# alone, so that another key (filter, detect's other settings) does not measure every head again
DAMAGE_KEYS = ("top_n", "min_drop", "min_capabilities")


def damage_rule(universal: Mapping) -> dict:
    """The part of the ``universal`` config section that decides which heads are measured alone and
    which of them are universal."""
    return {key: universal[key] for key in DAMAGE_KEYS}


def degraded_tasks(damage: Mapping[str, Mapping], tasks: Mapping[str, Mapping], *, min_drop: float) -> list[str]:
    """The tasks a head degrades (see the module docstring), from its damage per task."""
    return [task for task, found in damage.items()
            if found["drop"] >= min_drop * tasks[task]["scale"] and found["drop"] > 0
            and (found.get("low") is None or found["low"] > 0)]


def universal_by_damage(damage: Mapping[str, Mapping[str, Mapping]], tasks: Mapping[str, Mapping],
                        capabilities: Mapping[str, str], *, min_drop: float,
                        min_capabilities: int) -> dict[str, list[str]]:
    """The heads measured alone that degrade tasks of at least ``min_capabilities`` capabilities,
    each with the tasks it degrades, ordered by (layer, head)."""
    found = {}
    for head, per_task in damage.items():
        degraded = degraded_tasks(per_task, tasks, min_drop=min_drop)
        if len({capabilities[task] for task in degraded}) >= min_capabilities:
            found[head] = degraded
    return dict(sorted(found.items(), key=lambda item: parse_head(item[0])))


def universal_in_context(steps: Sequence[Mapping], tasks: Mapping[str, Mapping], capabilities: Mapping[str, str],
                         *, min_drop: float, min_capabilities: int) -> dict[str, list[str]]:
    """At most one head of each task's list of ``steps``
    (:func:`headloc.workflow.damage.context_steps`, in list order) that is not specific to the
    task, with the task and the tasks it degrades there:

    * the first head whose step degrades, with the task's own capability, tasks of at least
      ``min_capabilities`` capabilities. A step degrades a task when both its own drop and the
      drop of the set it completes (from the unablated model) do: a step that only takes back what
      the heads above it had raised (a head whose ablation helps another task) is no damage;
    * else, where the whole list degrades such tasks although no one step does (steps each under
      the bar that add up), the head whose step costs those tasks most (its drops as shares of
      their scales, summed), among the heads whose step costs them at least as much as
      it costs the task itself (a head that mostly hurts its own task is specific to it, whatever
      its side cost).

    One a round: the heads below it were measured beside it, and are measured again once it is
    left out."""
    found: dict[str, list[str]] = {}
    rule = {"tasks": tasks, "capabilities": capabilities, "min_drop": min_drop, "min_capabilities": min_capabilities}
    for task in dict.fromkeys(step["task"] for step in steps):
        listed = [step for step in steps if step["task"] == task]
        flagged = _first_costly_step(listed, **rule) or _costliest_step(listed, **rule)
        if flagged:
            step, hit = flagged
            found[step["head"]] = list(dict.fromkeys(found.get(step["head"], []) + hit))
    return found


def _first_costly_step(listed: Sequence[Mapping], *, tasks, capabilities, min_drop, min_capabilities):
    """The first of one list's steps that degrades (and its set too) tasks that, with the list's
    own, span ``min_capabilities`` capabilities: (step, its task and those tasks), or None."""
    for step in listed:
        degraded = set(degraded_tasks(step["set_damage"], tasks, min_drop=min_drop))
        hit = [step["task"]] + [other for other in degraded_tasks(step["damage"], tasks, min_drop=min_drop)
                                if other in degraded]
        if len({capabilities[name] for name in hit}) >= min_capabilities:
            return step, hit
    return None


def _costliest_step(listed: Sequence[Mapping], *, tasks, capabilities, min_drop, min_capabilities):
    """Where one whole list degrades tasks of other capabilities: the step that costs them most,
    among the steps that cost them at least their share of the list's own task; (step, its task
    and those tasks), or None."""
    task = listed[-1]["task"]
    hit = [task] + [other for other in degraded_tasks(listed[-1]["set_damage"], tasks, min_drop=min_drop)
                    if capabilities[other] != capabilities[task]]
    if len({capabilities[name] for name in hit}) < min_capabilities:
        return None
    costly = [step for step in listed
              if _shares(step, hit[1:], tasks) > 0 and _shares(step, hit[1:], tasks) >= _shares(step, [task], tasks)]
    return (max(costly, key=lambda step: _shares(step, hit[1:], tasks)), hit) if costly else None


def _shares(step: Mapping, names: Sequence[str], tasks: Mapping[str, Mapping]) -> float:
    """A step's drops on ``names`` as shares of their scales (the drop itself where a scale is 0),
    summed."""
    return sum(step["damage"][name]["drop"] / (tasks[name]["scale"] or 1.0) for name in names)


def wanted_sets(rankings: Mapping[str, Sequence[str]], lists: Mapping[str, Sequence[str]], top_n: int, k: int,
                measured: Container[str]) -> list[list[str]]:
    """The head sets the next round measures: every task's top ``top_n`` and filtered top k alone,
    and its unfiltered top ``k`` whole (the scale of a task in its own unit), while any of them is
    not ``measured``; then the cumulative sets of every filtered top k (first alone: a head
    universal alone moves the lists before their sets are measured)."""
    alone = [[head] for ranking in rankings.values() for head in ranking[:top_n]]
    alone += [[head] for heads in lists.values() for head in heads] + [list(r[:k]) for r in rankings.values()]
    cumulative = [list(heads[:i]) for heads in lists.values() for i in range(2, len(heads) + 1)]
    for wanted in (alone, cumulative):
        new = {format_headset(heads): heads for heads in wanted if format_headset(heads) not in measured}
        if new:
            return list(new.values())
    return []


class Measured(NamedTuple):
    """What :func:`measure_heads` found: each head's damage alone, each measured step in context
    (``context_steps`` of every round's lists), the universal heads with their tasks, and each
    task's scale (``task_scales``; both in headloc.workflow.damage)."""

    alone: dict
    in_context: list
    universal: dict
    scales: dict


def measure_heads(evaluate: Callable[[list[list[str]]], dict], baseline: Mapping[str, SetScore],
                  rankings: Mapping[str, Sequence[str]], tasks: Mapping[str, Mapping],
                  capabilities: Mapping[str, str], *, top_n: int, k: int, min_drop: float,
                  min_capabilities: int, log=None) -> Measured:
    """Measure heads alone and in context until every task's filtered top ``k`` and its cumulative
    sets are measured (module docstring): ``evaluate(head sets) -> {head set: {task: SetScore}}``
    (keys as :func:`headloc.heads.format_headset` spells them) measures a round; ``baseline`` is the
    unablated model's SetScore per task; ``tasks`` each task's ``baseline``, ``higher_is_better``
    and display ``unit``."""
    scores: dict[str, Mapping[str, SetScore]] = {NO_HEADS: baseline}
    universal: dict[str, list[str]] = {}
    steps: dict[tuple, dict] = {}
    # each round measures new sets or finds a new universal head, which takes at most three rounds
    # (heads alone, their sets, the check): more means the rule does not settle, a bug
    heads = {head for ranking in rankings.values() for head in ranking}
    for _ in range(3 * (len(heads) + 1)):
        lists = {task: task_heads(ranking, k, exclude=universal) for task, ranking in rankings.items()}
        new = wanted_sets(rankings, lists, top_n, k, scores)
        if new:
            if log is not None:
                log.info("measuring %d head sets on %d tasks: %s", len(new), len(tasks),
                         ", ".join(map(format_headset, new)))
            scores.update(evaluate(new))
        scales = task_scales(tasks, scores, rankings, k)  # measured in the first round
        tasks = {task: {**facts, "scale": scales[task]} for task, facts in tasks.items()}
        current = context_steps(lists, scores, tasks)
        steps.update({(step["task"], step["beside"], step["head"]): step for step in current})
        alone = {name: step_damage(baseline, per_task, tasks) for name, per_task in scores.items()
                 if name != NO_HEADS and "+" not in name}
        rule = {"min_drop": min_drop, "min_capabilities": min_capabilities}
        by_alone = universal_by_damage(alone, tasks, capabilities, **rule)
        found = {**universal_in_context(current, tasks, capabilities, **rule), **by_alone, **universal}
        if log is not None:
            for head in sorted(found.keys() - universal.keys(), key=parse_head):
                how = "alone it degrades" if head in by_alone else "in its task's top k (named first) it degrades"
                log.info("%s is universal: %s %s", head, how, ", ".join(found[head]))
        if not new and found.keys() == universal.keys():
            return Measured(alone, list(steps.values()), universal, scales)
        universal = dict(sorted(found.items(), key=lambda item: parse_head(item[0])))
    raise RuntimeError(f"the universal heads did not settle in {3 * (len(heads) + 1)} rounds: {', '.join(universal)}")
