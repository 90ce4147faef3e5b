"""Thompson sampling as in the paper's released code, and the variant that rewards damage."""

import numpy as np
import pytest

from headloc.search.thompson import ThompsonSampling, update


def test_the_update_matches_a_hand_computation():
    # Beta(1, 1) everywhere; a mask ablating head 0 earns 0.8, then one ablating head 2 earns 0.2.
    # Ablated heads: a += r, b += 1 - r; kept heads: a += (1 - r) / 2, b += r / 2.
    a, b = update(np.ones(3), np.ones(3), np.array([True, False, False]), 0.8)
    a, b = update(a, b, np.array([False, False, True]), 0.2)
    assert a == pytest.approx([1.8 + 0.4, 1.1 + 0.4, 1.1 + 0.2])
    assert b == pytest.approx([1.2 + 0.1, 1.4 + 0.1, 1.4 + 0.8])


def test_a_search_on_three_heads_by_hand():
    # sparsity 0.4 ablates int(3 x 0.4) = 1 head; seed 0 draws head 2 in both iterations: the
    # repeated mask is scored once (2 evaluations) and updates the posterior twice with r = 0.2.
    search = ThompsonSampling(3, n_masks=3, seed=0, sparsity=0.4, reward="score", score_range=(0.0, 1.0))
    masks, scores, found = search.complete(lambda m: 0.9 - 0.1 * m[:, 0] - 0.4 * m[:, 1] - 0.7 * m[:, 2])
    assert masks.tolist() == [[0, 0, 0], [0, 0, 1]] and found.n_evals == 2
    assert found.details["a"] == pytest.approx([1.8, 1.8, 1.4]) and found.details["b"] == pytest.approx([1.2, 1.2, 2.6])
    assert found.coef == pytest.approx([0.6, 0.6, 1.4 / 4.0]) and found.ranking.tolist() == [0, 1, 2]


def test_rewards():
    released = ThompsonSampling(10, 5, sparsity=0.1, reward="score", score_range=(0.0, 1.0))
    assert released.rewarded(0.7, baseline=0.9) == pytest.approx(0.7)
    assert released.rewarded(1.3, baseline=0.9) == 1.0  # clipped to the score range
    damage = ThompsonSampling(10, 5, sparsity=0.1, reward="damage", score_range=(-1.0, 0.0))
    assert damage.rewarded(-0.5, baseline=-0.1) == pytest.approx(0.4 / 0.9)
    assert damage.rewarded(0.0, baseline=-0.1) == 0.0


def test_as_released_it_settles_on_harmless_heads_and_the_damage_variant_on_the_harmful_one():
    def score(masks):  # head 0 carries the task
        return 0.9 - 0.8 * masks[:, 0] - 0.01 * masks[:, 1:].sum(axis=1)

    released_search = ThompsonSampling(20, 60, seed=1, sparsity=0.1, reward="score", score_range=(0.0, 1.0))
    masks, scores, released = released_search.complete(score)
    assert released.ranking[0] != 0 and not masks[-5:, 0].any() and scores[-5:].min() > 0.85
    damage_search = ThompsonSampling(20, 60, seed=1, sparsity=0.1, reward="damage", score_range=(0.0, 1.0))
    masks, scores, damage = damage_search.complete(score)
    assert damage.ranking[0] == 0 and masks[-5:, 0].all()


def test_the_budget_counts_the_baseline_and_is_never_exceeded():
    for budget in (2, 7, 25):
        masks, _, found = ThompsonSampling(40, budget, seed=2, sparsity=0.1, masks_per_round=3, reward="score",
                                          score_range=(0.0, 1.0)).complete(
            lambda m: 1.0 - 0.5 * m[:, 3])
        assert found.n_evals == len(masks) <= budget and found.details["iterations"] == budget - 1


@pytest.mark.parametrize("options, message", [
    (dict(reward="accuracy"), "reward must be one of 'score', 'damage', got 'accuracy'"),
    (dict(sparsity=0.0), r"sparsity must lie in \(0, 1\) .* got 0.0"),
    (dict(sparsity=0.01), r"at least one of the 40 heads .* got 0.01"),
    (dict(score_range=(1.0, 0.0)), r"score_range must be \(worst, best\) with worst < best, got \(1.0, 0.0\)"),
    (dict(masks_per_round=0), "masks_per_round must be an integer >= 1, got 0"),
])
def test_bad_options_name_the_value_and_what_is_valid(options, message):
    with pytest.raises(ValueError, match=message):
        ThompsonSampling(**{"n_heads": 40, "n_masks": 10, "sparsity": 0.05, "reward": "score",
                            "score_range": (0.0, 1.0), **options})
