"""Sequential searches resume from any point of their record (headloc.search.sequential)."""

import math

import numpy as np
import pytest

from headloc.search.group_testing import GroupTesting
from headloc.search.simulate import make_world
from headloc.search.thompson import ThompsonSampling

WORLD = make_world(seed=4, n_heads=128, tau=0.02)
SEARCHES = {
    "group testing": GroupTesting(128, 40, seed=4, k=5),
    "group testing in rounds": GroupTesting(128, 40, seed=4, k=5, masks_per_round=3),
    "thompson": ThompsonSampling(128, 24, seed=4, sparsity=0.05, reward="damage",
                                 score_range=(math.log(1 / 4), 0.0), masks_per_round=2),
}


def continue_from(search, masks, scores):
    """What a job does after reloading its record: ask, score, append, until done."""
    while (batch := search.next_masks(masks, scores)) is not None:
        scored = {row.tobytes() for row in masks}
        assert len(batch) and all(row.tobytes() not in scored for row in batch)  # nothing scored twice
        assert len({row.tobytes() for row in batch}) == len(batch)
        masks, scores = np.vstack([masks, batch]), np.concatenate([scores, WORLD.score(batch)])
        assert len(masks) <= search.budget
    return masks, scores


@pytest.mark.parametrize("name", SEARCHES)
def test_a_record_cut_anywhere_resumes_to_the_same_record_and_result(name):
    search = SEARCHES[name]
    masks, scores, found = search.run(WORLD.score)
    assert len(masks) > 20 and not masks[0].any()
    for cut in range(len(masks) + 1):
        resumed_masks, resumed_scores = continue_from(search, masks[:cut], scores[:cut])
        assert np.array_equal(resumed_masks, masks) and np.array_equal(resumed_scores, scores)
    again = search.recover(masks, scores)
    assert np.array_equal(again.ranking, found.ranking) and np.array_equal(again.coef, found.coef)
    assert again.labels == found.labels and again.n_evals == found.n_evals == len(masks)


def test_a_record_of_other_settings_or_unfinished_is_refused():
    search = SEARCHES["group testing"]
    masks, scores, _ = search.run(WORLD.score)
    with pytest.raises(ValueError, match="not the masks this search proposes"):
        GroupTesting(128, 40, seed=5, k=5).next_masks(masks, scores)
    with pytest.raises(ValueError, match="unfinished: .* more to score"):
        search.recover(masks[:-1], scores[:-1])
    with pytest.raises(ValueError, match="3 masks but 2 scores"):
        search.next_masks(masks[:3], scores[:2])
    with pytest.raises(ValueError, match="search ended after"):
        search.next_masks(np.vstack([masks, masks[-1:]]), np.append(scores, 0.0))
