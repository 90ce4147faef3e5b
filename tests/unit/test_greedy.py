"""Greedy search rounds on a synthetic model whose score is known in closed form."""

import numpy as np
import pytest

from headloc.search import greedy


def run_greedy(score_of, n_heads, k, exclude=()):
    chosen, n_evals = [], 0
    for _ in range(k):
        masks = greedy.round_masks(n_heads, chosen, exclude)
        if chosen:  # round 1 is the one-shot matrix; later rounds never ablate an excluded head
            assert not masks[:, list(exclude)].any()
        head, by_head = greedy.choose(masks, np.array([score_of(m) for m in masks]), chosen, exclude)
        chosen.append(head)
        n_evals += len(masks)
    run_greedy.n_evals = n_evals
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


UNIVERSAL = 2
TASK_EFFECTS = {5: -0.3, 6: -0.2, 1: -0.1}


def universal_score(mask):
    """Removing the universal head floors the score whatever else is removed; task heads add up."""
    if mask[UNIVERSAL]:
        return 0.05
    return max(0.05, 1.0 + sum(effect * mask[head] for head, effect in TASK_EFFECTS.items()))


def test_a_universal_head_swallows_unfiltered_greedy_rounds():
    chosen, last = run_greedy(universal_score, n_heads=8, k=3)
    assert chosen == [UNIVERSAL, 0, 1]  # after round 1 every head ties at the floor: index order
    filtered_afterwards = greedy.filter_ranking(greedy.ranking(chosen, last), [UNIVERSAL])
    assert filtered_afterwards[:3] == [0, 1, 3]  # the meaningless top of the Table 4


def test_excluding_the_universal_head_lets_greedy_find_the_task_heads():
    chosen, last = run_greedy(universal_score, n_heads=8, k=3, exclude=[UNIVERSAL])
    assert chosen == [5, 6, 1]
    assert run_greedy.n_evals == 1 + 8 + 6 + 5  # round 1: unablated + every head alone
    order = greedy.ranking(chosen, last, exclude=[UNIVERSAL])
    assert order[:3] == [5, 6, 1] and order[-1] == UNIVERSAL and sorted(order) == list(range(8))


def test_one_shot_greedy_filters_its_ranking():
    masks = greedy.round_masks(8, [])
    scores = np.array([universal_score(m) for m in masks])
    effects = scores[1:] - scores[0]
    one_shot = [int(h) for h in np.lexsort((np.arange(8), effects))]
    assert one_shot[:4] == [UNIVERSAL, 5, 6, 1]
    assert greedy.filter_ranking(one_shot, [UNIVERSAL])[:3] == [5, 6, 1]


def test_exclusions_are_checked():
    with pytest.raises(ValueError, match="outside the model's 4 heads"):
        greedy.round_masks(4, [], exclude=[4])
    with pytest.raises(ValueError, match="both chosen and excluded"):
        greedy.round_masks(4, [1], exclude=[1])
    with pytest.raises(ValueError, match="no candidate heads left"):
        greedy.round_masks(2, [0], exclude=[1])
    with pytest.raises(ValueError, match="excluding heads \\[3\\]"):
        greedy.choose(greedy.round_masks(4, [0]), np.zeros(3), [0], exclude=[3])


def test_round_one_scores_an_excluded_head_but_never_chooses_it():
    masks = greedy.round_masks(4, [], exclude=[2])
    assert np.array_equal(masks, greedy.round_masks(4, []))  # the one-shot matrix, shared with greedy1s
    head, by_head = greedy.choose(masks, np.array([1.0, 0.9, 0.8, 0.1, 0.7]), [], exclude=[2])
    assert head == 3  # head 2 alone scores lowest (0.1) but is excluded; head 3 is next (0.7)
    assert np.isnan(by_head[2]) and by_head[3] == 0.7


def test_round_one_records_each_excluded_heads_own_one_shot_score():
    """choose_round keeps an excluded (universal) head's round-1 score: row 1 + its index of the
    one-shot matrix, which greedy's recovery reports as the head's effect. Every row scores
    differently here, so a record read one row off shows."""
    from headloc.methods.greedy import choose_round
    from headloc.search.recovery import greedy_recovery

    names = ["L0H0", "L0H1", "L1H0", "L1H1"]
    masks = greedy.round_masks(4, [])
    scores = np.array([1.0, 0.9, 0.6, 0.2, 0.7])  # unablated, then each head alone
    record = choose_round(None, masks, scores, names, universal=["L0H1", "L1H0"])
    assert record["excluded_scores"] == {"L0H1": 0.6, "L1H0": 0.2}
    assert record["chosen"] == ["L1H1"]  # the lowest non-excluded head (0.7 beats 0.9)
    found = greedy_recovery([record], names, exclude=record["excluded"])
    assert found["coef"]["L0H1"] == pytest.approx(-0.4) and found["coef"]["L1H0"] == pytest.approx(-0.8)


def test_the_driver_leaves_universal_heads_out_of_greedys_rounds_as_the_workflow_does(tmp_path):
    """headloc.methods.driver.drive runs greedy's rounds through the workflow's steps: with universal
    heads given (universal.filter on), round 1 still scores every head alone, no later round ablates
    them, none is chosen and the ranking puts them last."""
    from headloc.heads import HeadGeometry
    from headloc.methods import get
    from headloc.methods.driver import drive
    from headloc.methods.settings import SearchSettings

    effect = np.array([0.5, 0.1, 0.0, 0.0, 0.3, 0.0])  # L0H0 (universal) matters most, then L1H1
    score = lambda masks: 1.0 - masks @ effect  # noqa: E731
    found = drive(get("greedy"), score, HeadGeometry(2, 3), tmp_path, SearchSettings(top_k=2), universal=["L0H0"])
    assert found["ranking"][:2] == ["L1H1", "L0H1"] and found["ranking"][-1] == "L0H0"
    assert found["n_evals"] == 7 + 4  # round 1: unablated + 6 heads; round 2: 4 candidates
    unfiltered = drive(get("greedy"), score, HeadGeometry(2, 3), tmp_path / "unfiltered", SearchSettings(top_k=2))
    assert unfiltered["ranking"][:2] == ["L0H0", "L1H1"]
