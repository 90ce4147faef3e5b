"""Universal heads from measured damage (headloc.workflow.damage and .universal, rule
single_head_damage's logic): a head's drop and its interval against numbers computed by hand,
which tasks a head degrades, and the rounds that measure every head a table would report as
task-specific."""

import numpy as np
import pytest

from headloc.heads import format_headset
from headloc.workflow.damage import SetScore, head_damage, task_scales
from headloc.workflow.universal import degraded_tasks, measure_heads, universal_by_damage, universal_in_context

CAPABILITIES = {"ioi": "syntax", "capitals": "knowledge", "induction": "copying"}
TASKS = {task: {"baseline": baseline, "higher_is_better": True, "unit": "points"}
         for task, baseline in (("ioi", 0.9), ("capitals", 0.6), ("induction", 0.8))}


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
    tasks = {"a": {"scale": 0.5}, "b": {"scale": 2.0}, "c": {"scale": 0.5}, "d": {"scale": 0.5}}
    damage = {"a": {"drop": 0.05, "low": 0.01},   # 10 % of 0.5: just enough
              "b": {"drop": 0.19, "low": 0.1},    # under 10 % of 2.0
              "c": {"drop": 0.2, "low": -0.01},   # its interval reaches zero: noise
              "d": {"drop": 0.2, "low": None}}    # no per-document values: the share decides
    assert degraded_tasks(damage, tasks, min_drop=0.1) == ["a", "d"]
    assert degraded_tasks(damage, tasks, min_drop=0.11) == ["d"]


def test_a_head_is_universal_when_the_tasks_it_degrades_span_enough_capabilities():
    strong = {"drop": 0.3, "low": 0.2}
    damage = {"L2H1": {"ioi": strong, "capitals": strong},
              "L0H3": {"ioi": strong, "capitals": {"drop": 0.0, "low": -0.1}, "induction": strong},
              "L1H0": {"ioi": strong}}
    tasks = {task: {"scale": facts["baseline"]} for task, facts in TASKS.items()}
    found = universal_by_damage(damage, tasks, CAPABILITIES, min_drop=0.1, min_capabilities=2)
    assert found == {"L0H3": ["ioi", "induction"], "L2H1": ["ioi", "capitals"]}  # by (layer, head)
    assert universal_by_damage(damage, tasks, CAPABILITIES, min_drop=0.1, min_capabilities=3) == {}
    same = {**CAPABILITIES, "capitals": "syntax"}  # two tasks of one capability are one
    assert list(universal_by_damage(damage, tasks, same, min_drop=0.1, min_capabilities=2)) == ["L0H3"]


def world(drops: dict[str, dict[str, float]], pairs: dict[tuple[str, str], dict[str, float]] | None = None):
    """``evaluate(head sets)`` of a world without noise: a set's score on a task is the task's
    baseline less each head's drop there (``drops``) and each pair's extra drop when both heads are
    in the set (``pairs``); and the sets it was asked, round by round."""
    asked = []

    def score(heads, task):
        alone = sum(drops.get(head, {}).get(task, 0.0) for head in heads)
        together = sum(extra.get(task, 0.0) for pair, extra in (pairs or {}).items() if set(pair) <= set(heads))
        return SetScore(TASKS[task]["baseline"] - alone - together, None)

    def evaluate(headsets):
        asked.append([format_headset(heads) for heads in headsets])
        return {format_headset(heads): {task: score(heads, task) for task in TASKS} for heads in headsets}
    return evaluate, asked


def measure(evaluate, rankings, top_n=2, k=2, min_capabilities=2):
    baseline = {task: SetScore(facts["baseline"], None) for task, facts in TASKS.items()}
    return measure_heads(evaluate, baseline, rankings, TASKS, CAPABILITIES, top_n=top_n, k=k, min_drop=0.1,
                         min_capabilities=min_capabilities)


def test_rounds_measure_every_head_a_filtered_top_k_reports():
    """ioi's top 2 holds a universal head: once it is found, ioi's filtered top 2 reaches its third
    head, which a second round measures alone; its own damage is ioi's alone, so it stays
    task-specific; a last round measures its new top 2 together (no set of a filtered list is
    measured before the heads alone have settled the lists; each unfiltered top 2 is measured whole
    in the first round, the scale of a task in its own unit)."""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2", "L0H3"], "capitals": ["L1H0", "L1H1", "L1H2", "L1H3"]}
    evaluate, asked = world({"L0H0": {"ioi": 0.5, "capitals": 0.3}, "L0H2": {"ioi": 0.4}})
    found = measure(evaluate, rankings)
    assert asked == [["L0H0", "L0H1", "L1H0", "L1H1", "L0H0+L0H1", "L1H0+L1H1"], ["L0H2"], ["L0H1+L0H2"]]
    assert found.universal == {"L0H0": ["ioi", "capitals"]}
    assert set(found.alone) == {"L0H0", "L0H1", "L0H2", "L1H0", "L1H1"}
    assert found.alone["L0H0"]["capitals"]["drop"] == pytest.approx(0.3)
    # a second universal head among the ones the first round's filter brought in: a third round
    evaluate, asked = world({"L0H0": {"ioi": 0.5, "capitals": 0.3}, "L0H2": {"ioi": 0.4, "induction": 0.2}})
    found = measure(evaluate, rankings)
    assert asked[1:] == [["L0H2"], ["L0H3"], ["L0H1+L0H3"]] and list(found.universal) == ["L0H0", "L0H2"]


def test_nothing_universal_is_one_round_of_the_top_n_and_each_top_k_whole():
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2"], "capitals": ["L0H1", "L1H1", "L1H2"]}
    evaluate, asked = world({})
    found = measure(evaluate, rankings)
    assert asked == [["L0H0", "L0H1", "L1H1", "L0H0+L0H1", "L0H1+L1H1"]] and found.universal == {}
    assert len(found.alone) == 3 and len(found.in_context) == 4  # two steps in each task's top 2


def test_a_head_that_costs_another_capability_beside_the_heads_above_it_is_universal():
    """Alone each of ioi's heads costs ioi only; L0H1 beside L0H0 costs capitals 0.3 as well: it
    counts ioi (its search ranked it there) and capitals, and ioi's top 2 moves past it. Its step
    is measured from the set above it: L0H0 alone costs capitals 0.05, under the 0.06 asked."""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2"], "capitals": ["L1H0", "L1H1"]}
    evaluate, asked = world({"L0H0": {"ioi": 0.5, "capitals": 0.05}, "L0H1": {"ioi": 0.3}},
                            pairs={("L0H0", "L0H1"): {"capitals": 0.3}})
    found = measure(evaluate, rankings)
    assert found.universal == {"L0H1": ["ioi", "capitals"]}
    step = next(s for s in found.in_context if s["head"] == "L0H1" and s["beside"] == "L0H0")
    assert step["task"] == "ioi" and step["damage"]["capitals"]["drop"] == pytest.approx(0.3)
    assert asked[1:] == [["L0H2"], ["L0H0+L0H2"]]  # ioi's top 2 without it, measured next
    # the same step on a task of ioi's own capability only: no second capability, not universal
    evaluate, _ = world({"L0H0": {"ioi": 0.5}, "L0H1": {"ioi": 0.3}}, pairs={("L0H0", "L0H1"): {"ioi": 0.3}})
    assert measure(evaluate, rankings).universal == {}


def test_steps_each_under_the_bar_that_add_up_leave_out_the_costliest_head_that_is_not_the_task_s_own():
    """ioi's top 2 cost capitals 0.025 and 0.04 a step (under the 0.06 asked), 0.065 together: the
    head whose step costs capitals most among those that cost it at least their share of ioi
    (L0H1: capitals 0.067 of its score, ioi 0.011) is universal. A head that mostly hurts ioi
    (L0H0: ioi 0.56) is ioi's, whatever it costs capitals; with no other, none is."""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2"], "capitals": ["L1H0", "L1H1"]}
    drops = {"L0H0": {"ioi": 0.5, "capitals": 0.025}, "L0H1": {"ioi": 0.01, "capitals": 0.03}}
    evaluate, asked = world(drops, pairs={("L0H0", "L0H1"): {"capitals": 0.01}})
    assert measure(evaluate, rankings).universal == {"L0H1": ["ioi", "capitals"]}
    assert asked[1:] == [["L0H2"], ["L0H0+L0H2"]]  # ioi's top 2 without it, measured next
    evaluate, _ = world(drops, pairs={("L0H0", "L0H1"): {"capitals": -0.01}})  # 0.045 together
    assert measure(evaluate, rankings).universal == {}
    # both mostly ioi's (0.56 and 0.33 of it): the set costs capitals 0.07, neither is left out
    evaluate, _ = world({"L0H0": {"ioi": 0.5, "capitals": 0.04}, "L0H1": {"ioi": 0.3, "capitals": 0.03}})
    assert measure(evaluate, rankings).universal == {}
    # both cost capitals more than their share of ioi: the costlier (L0H0, 0.058 of capitals) goes
    evaluate, _ = world({"L0H0": {"ioi": 0.05, "capitals": 0.035}, "L0H1": {"ioi": 0.01, "capitals": 0.02}},
                        pairs={("L0H0", "L0H1"): {"capitals": 0.01}})
    assert measure(evaluate, rankings).universal == {"L0H0": ["ioi", "capitals"]}


def test_only_the_first_head_of_a_top_k_that_costs_another_capability_is_left_out_per_round():
    """L0H2's cost to capitals comes only beside L0H1: once L0H1 is universal, L0H2 is measured
    beside L0H0 alone, costs ioi only, and stays in ioi's top 3."""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2", "L0H3"], "capitals": ["L1H0"]}
    evaluate, asked = world({"L0H0": {"ioi": 0.3}, "L0H1": {"ioi": 0.2}, "L0H2": {"ioi": 0.2}},
                            pairs={("L0H0", "L0H1"): {"capitals": 0.2}, ("L0H1", "L0H2"): {"capitals": 0.2}})
    found = measure(evaluate, rankings, k=3)
    assert found.universal == {"L0H1": ["ioi", "capitals"]}
    assert "L0H0+L0H1+L0H2" in asked[0] and asked[1] == ["L0H0+L0H1"]  # both steps cost capitals
    assert asked[2:] == [["L0H3"], ["L0H0+L0H2", "L0H0+L0H2+L0H3"]]


def test_a_step_that_takes_back_what_the_heads_above_it_raised_is_no_damage():
    """Ablating L0H0 raises capitals by 0.2; L0H1 beside it lowers capitals by 0.25, but the pair
    leaves capitals only 0.05 under its unablated 0.6 (under the 0.06 asked): no damage, not
    universal. Lowered by 0.3 beside it, the pair costs capitals 0.1: universal."""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2"], "capitals": ["L1H0"]}
    drops = {"L0H0": {"ioi": 0.5, "capitals": -0.2}, "L0H1": {"ioi": 0.3}}
    evaluate, _ = world(drops, pairs={("L0H0", "L0H1"): {"capitals": 0.25}})
    found = measure(evaluate, rankings)
    assert found.universal == {}
    step = next(s for s in found.in_context if s["head"] == "L0H1")
    assert step["damage"]["capitals"]["drop"] == pytest.approx(0.25)
    assert step["set_damage"]["capitals"]["drop"] == pytest.approx(0.05)
    evaluate, _ = world(drops, pairs={("L0H0", "L0H1"): {"capitals": 0.3}})
    assert measure(evaluate, rankings).universal == {"L0H1": ["ioi", "capitals"]}


def test_a_step_counts_its_own_task_s_capability_even_where_it_does_not_lower_that_task():
    """The search ranked L0H1 in ioi's top 3; beside L0H0 it costs ioi nothing more (ioi is at its
    floor there) and capitals 0.3: it counts ioi by the ranking and capitals by the damage, as the
    demo's L1H0 does induction and capitals. (L0H2 beside both gives capitals back, so the whole
    top 3 costs capitals nothing: the step alone decides.)"""
    rankings = {"ioi": ["L0H0", "L0H1", "L0H2", "L0H3"], "capitals": ["L1H0", "L1H1"]}
    evaluate, _ = world({"L0H0": {"ioi": 0.9}}, pairs={("L0H0", "L0H1"): {"capitals": 0.3},
                                                       ("L0H1", "L0H2"): {"capitals": -0.3}})
    found = measure(evaluate, rankings, k=3)
    step = next(s for s in found.in_context if s["head"] == "L0H1" and s["beside"] == "L0H0")
    assert step["damage"]["ioi"]["drop"] == 0.0
    assert found.universal == {"L0H1": ["ioi", "capitals"]}


def test_a_log_likelihood_s_bar_is_a_share_of_what_its_own_top_k_costs_not_of_its_unablated_score():
    """plural's score is a log-likelihood (-0.3 nats unablated; its own top 2 costs it 5 nats): a
    head that costs it 0.2 nats passes a tenth of |-0.3| but not a tenth of the 5 its strongest
    heads cost, so it degrades ioi only, and is no universal head; at 0.6 nats it degrades both.
    ioi, shown in points, keeps a tenth of its unablated score."""
    tasks = {"ioi": {"baseline": 0.9, "higher_is_better": True, "unit": "points"},
             "plural": {"baseline": -0.3, "higher_is_better": True, "unit": "own"}}
    capabilities = {"ioi": "syntax", "plural": "morphology"}
    rankings = {"ioi": ["L0H0", "L0H1"], "plural": ["L1H0", "L1H1"]}

    def found(cost):
        drops = {"L0H0": {"ioi": 0.5, "plural": cost}, "L1H0": {"plural": 3.0}, "L1H1": {"plural": 2.0}}

        def evaluate(headsets):
            return {format_headset(heads): {task: SetScore(facts["baseline"] - sum(drops.get(h, {}).get(task, 0.0)
                                                                                   for h in heads), None)
                                            for task, facts in tasks.items()} for heads in headsets}
        baseline = {task: SetScore(facts["baseline"], None) for task, facts in tasks.items()}
        return measure_heads(evaluate, baseline, rankings, tasks, capabilities, top_n=2, k=2, min_drop=0.1,
                             min_capabilities=2)

    low = found(0.2)
    assert low.scales == pytest.approx({"ioi": 0.9, "plural": 5.0}) and low.universal == {}
    assert found(0.6).universal == {"L0H0": ["ioi", "plural"]}


def test_a_scale_is_the_size_of_a_top_k_s_drop_in_either_direction_and_shares_are_of_it():
    """A perplexity (lower is better) rises from 10 to 30 with its top head ablated: scale 20 (a
    relative task's is its unablated score, as its tables show it in percent of it). In
    ioi's top 2 each step costs plural 0.3 nats (under a tenth of its scale, 5), the pair 0.6 (over
    it): of the two, L0H0 costs ioi 0.56 of its score and plural 0.06 of its scale, so it is ioi's;
    L0H1 (ioi 0.01) is the one left out."""
    tasks = {"ppl": {"unit": "own", "baseline": 10.0}, "swear": {"unit": "relative", "baseline": 6.0}}
    scores = {"none": {"ppl": SetScore(10.0, None), "swear": SetScore(6.0, None)},
              "L0H1": {"ppl": SetScore(30.0, None), "swear": SetScore(1.0, None)}}
    rankings = {"ppl": ["L0H1", "L0H2"], "swear": ["L0H1"]}
    assert task_scales(tasks, scores, rankings, k=1) == {"ppl": 20.0, "swear": 6.0}  # relative: % of its score
    tasks = {"ioi": {"baseline": 0.9, "scale": 0.9}, "plural": {"baseline": -0.3, "scale": 5.0}}

    def step(head, beside, ioi, plural, set_plural):
        return {"task": "ioi", "head": head, "beside": beside,
                "damage": {"ioi": {"drop": ioi, "low": None}, "plural": {"drop": plural, "low": None}},
                "set_damage": {"ioi": {"drop": 0.51, "low": None}, "plural": {"drop": set_plural, "low": None}}}
    steps = [step("L0H0", "none", 0.5, 0.3, 0.3), step("L0H1", "L0H0", 0.01, 0.3, 0.6)]
    found = universal_in_context(steps, tasks, {"ioi": "syntax", "plural": "morphology"}, min_drop=0.1,
                                 min_capabilities=2)
    assert found == {"L0H1": ["ioi", "plural"]}
