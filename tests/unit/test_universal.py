"""Universal heads from measured damage (headloc.workflow.universal, rule single_head_damage's
logic): a head's drop and its interval against numbers computed by hand, which tasks a head
degrades, and the rounds that measure every head a table would report as task-specific."""

import numpy as np
import pytest

from headloc.workflow.universal import degraded_tasks, head_damage, measure_heads, universal_by_damage

CAPABILITIES = {"ioi": "syntax", "capitals": "knowledge", "induction": "copying"}
TASKS = {"ioi": {"baseline": 0.9}, "capitals": {"baseline": 0.6}, "induction": {"baseline": 0.8}}


def test_a_drop_and_its_interval_are_the_paired_differences_mean_and_standard_error():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, 50).astype(float)
    ablated = base * (rng.random(50) > 0.3)  # some right answers lost
    found = head_damage(base.mean(), ablated.mean(), base, ablated, True)
    diff = base - ablated
    se = np.sqrt(np.sum((diff - diff.mean()) ** 2) / (len(diff) - 1)) / np.sqrt(len(diff))
    assert found["drop"] == pytest.approx(diff.mean())
    assert (found["low"], found["high"]) == pytest.approx((diff.mean() - 1.96 * se, diff.mean() + 1.96 * se))
    # a lower-is-better metric (a perplexity): a rise is the drop
    rise = head_damage(10.0, 12.5, None, None, False)
    assert rise["drop"] == pytest.approx(2.5) and rise["low"] is None and rise["value"] == 12.5


def test_a_head_degrades_a_task_only_by_the_share_asked_and_above_the_noise():
    tasks = {"a": {"baseline": 0.5}, "b": {"baseline": -2.0}, "c": {"baseline": 0.5}, "d": {"baseline": 0.5}}
    damage = {"a": {"drop": 0.05, "low": 0.01},   # 10 % of 0.5: just enough
              "b": {"drop": 0.19, "low": 0.1},    # under 10 % of |-2.0|
              "c": {"drop": 0.2, "low": -0.01},   # its interval reaches zero: noise
              "d": {"drop": 0.2, "low": None}}    # no per-document values: the share decides
    assert degraded_tasks(damage, tasks, min_drop=0.1) == ["a", "d"]
    assert degraded_tasks(damage, tasks, min_drop=0.11) == ["d"]


def test_a_head_is_universal_when_the_tasks_it_degrades_span_enough_capabilities():
    strong = {"drop": 0.3, "low": 0.2}
    damage = {"L2H1": {"ioi": strong, "capitals": strong},
              "L0H3": {"ioi": strong, "capitals": {"drop": 0.0, "low": -0.1}, "induction": strong},
              "L1H0": {"ioi": strong}}
    found = universal_by_damage(damage, TASKS, CAPABILITIES, min_drop=0.1, min_capabilities=2)
    assert found == {"L0H3": ["ioi", "induction"], "L2H1": ["ioi", "capitals"]}  # by (layer, head)
    assert universal_by_damage(damage, TASKS, CAPABILITIES, min_drop=0.1, min_capabilities=3) == {}
    same = {**CAPABILITIES, "capitals": "syntax"}  # two tasks of one capability are one
    assert list(universal_by_damage(damage, TASKS, same, min_drop=0.1, min_capabilities=2)) == ["L0H3"]


def world(drops: dict[str, dict[str, float]]):
    """``evaluate(heads)`` of a world whose heads alone drop each task by ``drops`` (0 elsewhere),
    without noise; the heads it was asked, round by round."""
    asked = []

    def evaluate(heads):
        asked.append(list(heads))
        return {head: {task: {"drop": drops.get(head, {}).get(task, 0.0), "low": drops.get(head, {}).get(task, 0.0)
                              - 0.01} for task in TASKS} for head in heads}
    return evaluate, asked


def test_rounds_measure_every_head_a_filtered_top_k_reports():
    """ioi's top 2 holds a universal head: once it is found, ioi's filtered top 2 reaches its third
    head, which a second round measures; its own damage is ioi's alone, so it stays task-specific."""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2", "L0H3"], "capitals": ["L1H0", "L1H1", "L1H2", "L1H3"]}
    evaluate, asked = world({"L0H0": {"ioi": 0.5, "capitals": 0.3}, "L0H2": {"ioi": 0.4}})
    damage, universal = measure_heads(evaluate, rankings, TASKS, CAPABILITIES, top_n=2, k=2, min_drop=0.1,
                                      min_capabilities=2)
    assert asked == [["L0H0", "L0H1", "L1H0", "L1H1"], ["L0H2"]]
    assert universal == {"L0H0": ["ioi", "capitals"]} and set(damage) == {"L0H0", "L0H1", "L0H2", "L1H0", "L1H1"}
    # a second universal head among the ones the first round's filter brought in: a third round
    evaluate, asked = world({"L0H0": {"ioi": 0.5, "capitals": 0.3}, "L0H2": {"ioi": 0.4, "induction": 0.2}})
    _, universal = measure_heads(evaluate, rankings, TASKS, CAPABILITIES, top_n=2, k=2, min_drop=0.1,
                                 min_capabilities=2)
    assert asked[1:] == [["L0H2"], ["L0H3"]] and list(universal) == ["L0H0", "L0H2"]


def test_nothing_universal_is_one_round_of_the_top_n():
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2"], "capitals": ["L0H1", "L1H1", "L1H2"]}
    evaluate, asked = world({})
    damage, universal = measure_heads(evaluate, rankings, TASKS, CAPABILITIES, top_n=2, k=2, min_drop=0.1,
                                      min_capabilities=2)
    assert asked == [["L0H0", "L0H1", "L1H1"]] and universal == {} and len(damage) == 3
