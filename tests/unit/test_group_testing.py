"""Adaptive group testing (headloc.search.group_testing) on oracles whose capability heads are known."""

import math

import numpy as np
import pytest

from headloc.search.group_testing import GroupTesting, default_group_size

N, K = 1024, 5


def additive(seed, n_heads=N, k=K):
    """A noiseless additive oracle: k heads lower the score by 0.1..0.5 each, the others by nothing."""
    rng = np.random.default_rng(seed)
    heads = rng.choice(n_heads, k, replace=False)
    effect = np.zeros(n_heads)
    effect[heads] = rng.uniform(0.1, 0.5, k)
    return set(heads.tolist()), lambda masks: 1.0 - masks @ effect


@pytest.mark.parametrize("group_size, slack", [(None, K), (128, 0)])
def test_a_noiseless_additive_oracle_gives_exactly_its_heads_in_about_k_log_n_over_k(group_size, slack):
    # k log2(N / k) + 2k: the adaptive lower bound plus one confirmation and one saturation check
    # per head. Groups of 128 are the noiseless optimum's size; the default (64) is half of it and
    # pays up to a test per head more for its robustness to noise.
    bound = K * math.log2(N / K) + 2 * K + slack
    for seed in range(4):
        heads, score = additive(seed)
        masks, scores, found = GroupTesting(N, 200, seed, k=K, group_size=group_size).run(score)
        assert set(found.ranking[:K].tolist()) == heads
        assert all(found.labels[h] == "confirmed" for h in heads)
        assert found.n_evals == len(masks) <= bound
        assert not masks[0].any() and found.baseline == scores[0] == 1.0


def test_a_confirmed_head_reports_its_single_effect_the_rest_their_smallest_group():
    heads, score = additive(0, n_heads=256, k=3)
    _, _, found = GroupTesting(256, 100, 0, k=3).run(score)
    one = found.ranking[0]
    assert found.coef[one] == pytest.approx(score(np.eye(256)[[one]])[0] - 1.0)
    rest = [h for h in range(256) if h not in heads]
    assert {found.labels[h].split(" of ")[0] for h in rest} <= {"group", "alone"}
    assert np.allclose(found.coef[rest], 0.0)  # the groups' drops are the confirmed heads' alone


def test_extra_heads_are_confirmed_beyond_the_top_k_which_holds_the_largest():
    # Five heads of effects 0.5 > ... > 0.1 and k = 3: with two extra heads the search confirms all
    # five (the universal filter may drop some of the top k; the next places stay confirmed), and
    # the top k are still the three largest, in order.
    effect = np.zeros(256)
    planted = [11, 60, 130, 201, 250]
    effect[planted] = [0.5, 0.4, 0.3, 0.2, 0.1]
    score = lambda masks: 1.0 - masks @ effect  # noqa: E731
    _, _, plain = GroupTesting(256, 100, 0, k=3).run(score)
    _, _, extra = GroupTesting(256, 100, 0, k=3, extra=2).run(score)
    assert [found.labels.count("confirmed") for found in (plain, extra)] == [3, 5]
    assert extra.ranking[:5].tolist() == planted and plain.ranking[:3].tolist() == planted[:3]
    assert extra.n_evals > plain.n_evals
    assert GroupTesting(8, 20, k=7, extra=5).wanted == 8  # never more than every head


def floor_and_hidden(search):
    """Head u (effect 1.0, the floor) first and head h (0.3) last in the search's first group."""
    group = search.partition()[0]
    effect = np.zeros(search.n_heads)
    effect[[group[0], group[-1]]] = [1.0, 0.3]
    return group[0], group[-1], effect


def test_saturation_finds_a_head_hidden_behind_the_floor():
    # Head u takes the score to its floor (0); head h, in u's group, is invisible while u is
    # ablated: the first half holding u explains the group's drop, additivity would clear the rest.
    search = GroupTesting(64, 60, seed=3, k=2, group_size=16)
    u, h, effect = floor_and_hidden(search)

    def floored(masks):
        return np.maximum(0.0, 1.0 - masks @ effect)

    _, _, found = search.run(floored)
    assert set(found.ranking[:2].tolist()) == {u, h} and found.labels[h] == "confirmed"
    _, _, blind = GroupTesting(64, 60, seed=3, k=2, group_size=16, saturation=False).run(floored)
    assert h not in blind.ranking[:2].tolist()


def test_saturation_holds_when_a_half_drops_below_its_whole_group():
    # Near the floor ablating more heads can lift the score a little: the group holding u and h
    # scores 0.15, its half holding u alone 0 (a drop larger than the group's). Judged by the
    # group's drop alone that half was not at the floor, the rest's inferred drop was negative and
    # h was lost (c1024-s1's copy1: the universal head found, its role head not).
    search = GroupTesting(64, 60, seed=3, k=2, group_size=16)
    u, h, effect = floor_and_hidden(search)

    def rebounding(masks):
        return np.maximum(0.0, 1.0 - masks @ effect) + 0.15 * masks[:, u] * masks[:, h]

    masks, scores, found = search.run(rebounding)
    assert rebounding(np.eye(64)[[u]] + np.eye(64)[[h]])[0] > rebounding(np.eye(64)[[u]])[0]  # the rebound
    assert set(found.ranking[:2].tolist()) == {u, h} and found.labels[h] == "confirmed"


@pytest.mark.parametrize("masks_per_round", [1, 8])
def test_the_budget_is_never_exceeded(masks_per_round):
    _, score = additive(1, n_heads=256, k=5)
    for budget in (2, 5, 17, 18, 30, 45):
        masks, _, found = GroupTesting(256, budget, 1, k=5, masks_per_round=masks_per_round).run(score)
        assert found.n_evals == len(masks) <= budget
        assert len({row.tobytes() for row in masks}) == len(masks)  # no mask scored twice
    assert "not measured" in GroupTesting(256, 5, 1, k=5).run(score)[2].labels  # groups left unscored


def test_rounds_of_masks_reach_the_same_heads():
    heads, score = additive(2, n_heads=256, k=5)
    masks, _, found = GroupTesting(256, 120, 2, k=5, masks_per_round=8).run(score)
    assert set(found.ranking[:5].tolist()) == heads


def test_the_group_size_rule():
    assert [default_group_size(n, 5) for n in (1024, 270, 64, 8)] == [64, 16, 4, 1]
    assert GroupTesting(270, 50, k=5).size == 16 and GroupTesting(270, 50, k=5, group_size=10).size == 10
    assert sorted(h for group in GroupTesting(270, 50, k=5).partition() for h in group) == list(range(270))


@pytest.mark.parametrize("options, message", [
    (dict(k=0), "k must be an integer >= 1, got 0"),
    (dict(k=65), "k must lie in 1..64 .* got 65"),
    (dict(group_size=0), "group_size must be an integer >= 1, got 0"),
    (dict(group_size=100), "group_size must lie in 1..64 .* or be None, got 100"),
    (dict(masks_per_round=0), "masks_per_round must be an integer >= 1, got 0"),
    (dict(extra=-1), r"extra must be an integer >= 0 \(heads confirmed beyond k\), got -1"),
    (dict(explained=1.5), r"explained must lie in \(0, 1\] .* got 1.5"),
    (dict(budget=1), "budget must be an integer >= 2, got 1"),
    (dict(n_heads=2.5), "n_heads must be an integer >= 1, got 2.5"),
])
def test_bad_options_name_the_value_and_what_is_valid(options, message):
    with pytest.raises(ValueError, match=message):
        GroupTesting(**{"n_heads": 64, "budget": 20, **options})
