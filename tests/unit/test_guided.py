"""Gradient-guided greedy (headloc.search.guided) against exhaustive greedy on worlds whose every
set's score is known, with estimates that miss or misjudge heads the way a gradient does."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headloc.search.guided import guided_greedy

N = 40


def world(effect: np.ndarray, backup: dict | None = None):
    """score_sets for 1 - the ablated heads' effects, plus ``backup``: {(primary, head): extra drop
    of head once primary is ablated}; and a counter of the sets scored."""
    calls = []

    def score_sets(head_sets):
        calls.extend(frozenset(s) for s in head_sets)
        return [1.0 - effect[list(s)].sum() - sum(d for (p, h), d in (backup or {}).items() if {p, h} <= set(s))
                for s in head_sets]
    return score_sets, calls


def exhaustive_greedy(score_sets, k: int) -> list[int]:
    """Greedy as the workflow runs it: every head beside those chosen, the lowest score joins."""
    chosen = []
    for _ in range(k):
        rest = [h for h in range(N) if h not in chosen]
        scores = score_sets([chosen + [h] for h in rest])
        chosen.append(rest[int(np.argmin(scores))])
    return chosen


def test_with_the_true_drops_as_estimates_it_is_greedy_at_a_fraction_of_its_evaluations():
    rng = np.random.default_rng(0)
    effect = rng.normal(0, 0.1, N)
    effect[[4, 11, 30]] = [1.2, 0.9, 0.7]
    backup = {(4, 22): 0.8}  # 22 counts only once 4 is ablated
    score_sets, calls = world(effect, backup)
    truth = lambda bg: effect + np.array([sum(d for (p, h2), d in backup.items() if h2 == h and p in bg)
                                          for h in range(N)])
    found = guided_greedy(truth, score_sets, N, 4, m=3, m_abs=0, carry=0)
    assert found.heads == exhaustive_greedy(world(effect, backup)[0], 4) == [4, 11, 22, 30]
    assert found.drops == pytest.approx([1.2, 0.9, 0.8 + effect[22], 0.7])
    assert found.evaluations == len(set(calls)) == 1 + 4 * 3  # each step's background was scored the step before
    assert found.gradient_passes == 4


def test_a_head_the_estimate_gives_the_wrong_sign_is_listed_by_its_size():
    """Head 7 hurts most, but its estimate says ablating it helps (a saturating gate): only the
    list by size of either sign (m_abs) finds it."""
    effect = np.zeros(N)
    effect[[7, 12, 25]] = [1.5, 0.6, 0.4]
    score_sets, _ = world(effect)
    wrong = lambda bg: np.where(np.arange(N) == 7, -2.0, effect)
    assert guided_greedy(wrong, score_sets, N, 1, m=3, m_abs=0, carry=0).heads == [12]
    assert guided_greedy(wrong, score_sets, N, 1, m=3, m_abs=1, carry=0).heads == [7]


def test_a_runner_up_the_estimate_drops_later_is_kept_by_its_measurement():
    """Head 9 is second alone and greedy's second; beside 3 the estimate no longer lists it (a
    gradient that misses it), so only carrying the step's runners-up keeps it."""
    effect = np.zeros(N)
    effect[[3, 9, 15, 16]] = [1.0, 0.8, 0.3, 0.2]
    score_sets, _ = world(effect)
    misses = lambda bg: effect if not bg else np.where(np.arange(N) == 9, 0.0, effect)
    assert guided_greedy(misses, score_sets, N, 2, m=2, m_abs=0, carry=0).heads == [3, 15]
    assert guided_greedy(misses, score_sets, N, 2, m=2, m_abs=0, carry=1).heads == [3, 9]


def test_no_set_is_scored_twice():
    effect = np.linspace(1, 0, N)
    score_sets, calls = world(effect)
    found = guided_greedy(lambda bg: effect, score_sets, N, 5, m=4, m_abs=4, carry=3)
    assert len(calls) == len(set(calls)) == found.evaluations
    assert found.heads == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("options, message", [
    ({"k": 0}, "k must be an integer >= 1"), ({"k": N + 1}, "k must lie in 1..40"),
    ({"m": -1}, "m must be an integer >= 0"), ({"m": 0, "m_abs": 0}, "cannot both be 0"),
    ({"carry": 1.5}, "carry must be an integer >= 0"),
])
def test_bad_options_are_refused_naming_the_value(options, message):
    score_sets, _ = world(np.zeros(N))
    with pytest.raises(ValueError, match=message):
        guided_greedy(lambda bg: np.zeros(N), score_sets, N, **{"k": 2, "m": 10, "m_abs": 10, "carry": 0, **options})


# ---------------------------------------------------------------- through the method, as the workflow and locate call it

def method_search(estimate, score_sets, k, **options):
    """The registered method's algorithm (what the guided kind calls), its options built as a config gives them."""
    from headloc import methods
    from headloc.methods.kinds.guided import GuidedParams

    method = methods.get("guided_greedy")
    return method.algorithm(estimate, score_sets, N, GuidedParams(method.name, k, method.options_of(options)))


def test_heads_that_tie_are_taken_lower_index_first():
    """Heads 2 and 5 drop the score alike, alone and beside each other: the lower index joins first,
    as greedy's rounds break ties (tests/workflow/test_methods.py)."""
    effect = np.zeros(N)
    effect[[2, 5]] = 0.7
    score_sets, _ = world(effect)
    found = method_search(lambda bg: effect, score_sets, 2, m=3, m_abs=0)
    assert found.heads == [2, 5] and found.lists[0][:2] == [2, 5]


def test_the_best_runners_up_are_carried_not_the_worst():
    """Step 1 lists 3, 7 and 12 (drops 1.0, 0.8, 0.1); beside 3 the estimate lists neither 7 nor 12.
    carry 1 keeps the best runner-up, 7, which then joins: greedy's second head."""
    effect = np.zeros(N)
    effect[[3, 7, 12]] = [1.0, 0.8, 0.1]
    score_sets, _ = world(effect)
    alone = np.zeros(N)
    alone[[3, 7, 12]] = [1.0, 0.9, 0.5]
    beside = np.zeros(N)
    beside[[10, 11]] = [1.0, 0.9]  # wrong leads: they do nothing
    found = method_search(lambda bg: beside if bg else alone, score_sets, 2, m=3, m_abs=0, carry=1)
    assert found.lists[1][-1] == 7 and found.heads == [3, 7]
    assert found.heads == exhaustive_greedy(world(effect)[0], 2)


@pytest.mark.parametrize("m, m_abs, listed", [(1, 0, 12), (0, 1, 7)])
def test_m_lists_by_signed_estimate_and_m_abs_by_size(m, m_abs, listed):
    """Head 7's estimate has the wrong sign and the largest size; 12's is the largest drop. The
    method's m lists 12, its m_abs lists 7 (each alone on the list, so each is chosen)."""
    effect = np.zeros(N)
    effect[[7, 12]] = [1.5, 0.6]
    score_sets, _ = world(effect)
    wrong = np.where(np.arange(N) == 7, -2.0, effect)
    found = method_search(lambda bg: wrong, score_sets, 1, m=m, m_abs=m_abs)
    assert found.lists == [[listed]] and found.heads == [listed]


def test_each_step_estimates_beside_the_heads_chosen_before_it():
    """The estimate is asked beside exactly the heads chosen so far, in their order."""
    effect = np.linspace(1, 0.5, N)
    score_sets, _ = world(effect)
    asked = []
    found = method_search(lambda bg: asked.append(list(bg)) or effect, score_sets, 3, m=2, m_abs=0)
    assert found.heads == [0, 1, 2] and asked == [[], [0], [0, 1]]


def test_a_listed_head_not_chosen_keeps_the_change_measured_for_it():
    """recovery.json's value of a head listed but not chosen is the score change measured beside
    that step's heads (negative: it lowered the score), the chosen heads' their own drops."""
    from headloc.methods.kinds.guided import guided_fields

    effect = np.zeros(N)
    effect[[3, 7, 12]] = [1.0, 0.8, 0.1]
    score_sets, _ = world(effect)
    found = method_search(lambda bg: effect, score_sets, 1, m=3, m_abs=0)
    names = [f"L{h // 8}H{h % 8}" for h in range(N)]
    coef = guided_fields(found, 0, names)["coef"]
    assert [coef[names[h]] for h in (3, 7, 12)] == pytest.approx([-1.0, -0.8, -0.1])
    assert coef[names[0]] == 0  # never listed


def test_a_head_listed_at_a_later_step_is_assessed_beside_that_steps_heads():
    """A head listed at step 2 and not chosen: its label says one head beside it, and the evidence
    compares the two sets it was measured on (the first chosen head with it, and without it)."""
    from headloc.methods.kinds.guided import guided_fields, measured_sets

    effect = np.zeros(N)
    effect[[3, 7, 12]] = [1.0, 0.8, 0.1]
    score_sets, _ = world(effect)
    found = method_search(lambda bg: effect, score_sets, 2, m=3, m_abs=0)
    assert found.heads == [3, 7]
    names = [f"L{h // 8}H{h % 8}" for h in range(N)]
    assert guided_fields(found, 0, names)["labels"][names[12]] == "measured beside 1 heads"
    assert measured_sets(found)[12] == ([3, 12], [3])
