"""Greedy search rounds on a synthetic model whose score is known in closed form."""

import numpy as np
import pytest

from headloc import greedy


def run_greedy(score_of, n_heads, k):
    chosen = []
    for _ in range(k):
        masks = greedy.round_masks(n_heads, chosen)
        head, by_head = greedy.choose(masks, np.array([score_of(m) for m in masks]), chosen)
        chosen.append(head)
    return chosen, by_head


def test_greedy_is_myopic_about_heads_that_only_hurt_together():
    # Heads 2 and 5 only hurt together (redundant copies); 7 hurts alone, 0 and 1 a little.
    def score(mask):
        return 1.0 - 0.1 * mask[7] - 0.8 * (mask[2] and mask[5]) - 0.01 * mask[:2].sum()

    chosen, _ = run_greedy(score, n_heads=8, k=3)
    assert chosen == [7, 0, 1]  # no single round sees the pair's effect


def test_rounds_add_each_remaining_head_once():
    masks = greedy.round_masks(5, [3, 1])
    assert masks.shape == (3, 5)
    assert (masks[:, [1, 3]] == 1).all()
    assert masks.sum(axis=1).tolist() == [3, 3, 3]
    assert sorted(np.flatnonzero(masks[:, [0, 2, 4]].sum(axis=0))) == [0, 1, 2]


def test_additive_effects_are_chosen_in_order_and_ranked():
    effects = np.array([-0.05, -0.3, 0.0, -0.2, -0.01, -0.4])
    chosen, last = run_greedy(lambda m: 1.0 + effects @ m, n_heads=6, k=3)
    assert chosen == [5, 1, 3]
    assert greedy.ranking(chosen, last) == [5, 1, 3, 0, 4, 2]


def test_choose_rejects_masks_of_another_round():
    with pytest.raises(ValueError, match="not the greedy round after heads \\[2\\]"):
        greedy.choose(greedy.round_masks(4, [1]), np.zeros(3), [2])


def test_ties_go_to_the_lower_head():
    head, _ = greedy.choose(greedy.round_masks(3, []), np.array([1.0, 0.5, 0.5, 0.7]), [])
    assert head == 0
