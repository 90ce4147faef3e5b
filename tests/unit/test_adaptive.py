"""Two-stage compressed sensing (headloc.search.adaptive) on planted models whose top heads are known."""

import numpy as np
import pytest

from headloc.search.adaptive import refine, stage1_masks, stage_sizes
from headloc.methods import make_masks
from headloc.search.masks import stratified_masks
from headloc.search.recovery import LassoRecovery

N, K = 270, 5  # SmolLM2's heads, the paper's top k


def planted(seed, noise=0.05):
    """Five heads carry the task (effects -0.3..-0.1), every other head a little; a clipped score."""
    rng = np.random.default_rng(100 + seed)
    truth = -0.01 * rng.random(N)
    heads = rng.choice(N, K, replace=False)
    truth[heads] = [-0.3, -0.25, -0.2, -0.15, -0.1]

    def score(phi):
        return np.clip(0.9 + phi @ truth, 0, 1) + noise * rng.standard_normal(len(phi))

    return set(heads.tolist()), score


def recall(found, heads):
    return len(set(found.tolist()) & heads) / K


def test_stage_two_ablates_only_candidates_at_the_candidate_rate():
    heads, score = planted(0)
    first, second = stage_sizes(50)
    phi1 = stage1_masks(N, first, sparsity=0.05, random_state=0)
    plan = refine(phi1, score(phi1), k=K, n_rows=second, random_state=0)
    assert (first, second) == (35, 15) and not plan.settled
    assert plan.masks.shape == (15, N) and len(plan.candidates) == 8 * K
    outside = np.setdiff1d(np.arange(N), plan.candidates)
    assert not plan.masks[:, outside].any()
    assert set(plan.masks.sum(axis=1).tolist()) == {8}  # round(0.2 x 40) candidates per row
    assert np.array_equal(phi1, make_masks(N, 50, method="cs_adaptive", sparsity=0.05, random_state=0))


def test_a_settled_screen_spends_no_more_evaluations():
    rng = np.random.default_rng(3)
    phi1 = stage1_masks(40, 60, sparsity=0.1, random_state=0)
    y1 = 0.9 - 0.5 * phi1[:, 3] - 0.4 * phi1[:, 17] + 0.001 * rng.standard_normal(60)
    plan = refine(phi1, y1, k=2, n_rows=30, random_state=0)
    assert plan.settled and plan.masks.shape == (0, 40)
    assert plan.probability[3] >= 0.9 and plan.probability[17] >= 0.9  # the stopping rule


def test_a_settled_screen_recovers_from_stage_one_alone(tmp_path):
    """The recovery reads stage 2's empty score table (it crashed on it) and fits stage 1's rows."""
    from headloc import methods
    from headloc.heads import HeadGeometry
    from headloc.methods.driver import drive
    from headloc.methods.settings import SearchSettings

    def score(masks):
        return 0.9 - 0.5 * masks[:, 3] - 0.4 * masks[:, 17]

    settings = SearchSettings(n_masks=86, top_k=2, sparsity=0.1, seed=0, alpha=0.001)
    found = drive(methods.get("cs_adaptive"), score, HeadGeometry(4, 10), tmp_path, settings)
    assert (tmp_path / "stage2" / "scores" / "0.tsv").read_text().count("\n") == 1  # the header only: settled
    first, _ = stage_sizes(86)
    assert found["n_evals"] == first and found["ranking"][:2] == ["L0H3", "L1H7"]


def test_two_stages_find_more_planted_heads_than_one_design_of_the_same_budget():
    adaptive, single = [], []
    for seed in range(6):
        heads, score = planted(seed)
        first, second = stage_sizes(50)
        phi1 = stage1_masks(N, first, sparsity=0.05, random_state=seed)
        y1 = score(phi1)
        plan = refine(phi1, y1, k=K, n_rows=second, random_state=seed)
        phi, y = np.vstack([phi1, plan.masks]), np.concatenate([y1, score(plan.masks)])
        adaptive.append(recall(LassoRecovery(random_state=seed).fit(phi, y).ranking_[:K], heads))
        phi = stratified_masks(N, 50, 0.05, np.random.default_rng(seed))
        single.append(recall(LassoRecovery(random_state=seed).fit(phi, score(phi)).ranking_[:K], heads))
    assert np.mean(adaptive) > np.mean(single)


def test_budget_too_small_is_refused():
    with pytest.raises(ValueError, match="at least 2 masks"):
        stage_sizes(1)
