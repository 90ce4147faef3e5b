import numpy as np
import pytest

from sklearn.utils.estimator_checks import parametrize_with_checks

from headloc.methods import make_masks
from headloc.search.recovery import LassoRecovery, SingleHeadRecovery, marginal_effects

N_HEADS = 270  # SmolLM2's 30 x 9


def planted(n_heads, n_masks, method, sparsity, seed, noise=0.01):
    """y = b0 + Phi x + noise with a 5-sparse negative x planted at known heads."""
    rng = np.random.default_rng(seed)
    heads = rng.choice(n_heads, 5, replace=False)
    x = np.zeros(n_heads)
    x[heads] = -np.array([0.30, 0.25, 0.20, 0.15, 0.10])
    phi = make_masks(n_heads, n_masks, method=method, sparsity=sparsity, random_state=seed)
    y = 0.8 + phi @ x + noise * rng.standard_normal(n_masks)
    return phi, y, heads, x


@pytest.mark.parametrize("method", ["cs_stratified", "cs_bernoulli"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_heads_come_back_from_few_measurements(method, seed):
    phi, y, heads, x = planted(N_HEADS, 100, method, 0.05, seed)  # M = 100 << N = 270
    fit = LassoRecovery(alpha="cv", random_state=0).fit(phi, y)
    assert set(fit.top_k(5)) == set(heads)
    assert list(fit.top_k(5)) == list(heads[np.argsort(x[heads])]), "ordered by effect size"
    assert fit.r2_ > 0.9 and fit.n_evals_ == 100
    assert abs(fit.intercept_ - 0.8) < 0.05


def test_fixed_alpha_and_attributes():
    phi, y, heads, _ = planted(N_HEADS, 120, "cs_stratified", 0.05, 5)
    fit = LassoRecovery(alpha=0.002).fit(phi, y)
    assert fit.alpha_ == 0.002 and fit.coef_.shape == (N_HEADS,)
    assert set(fit.top_k(5)) == set(heads)
    np.testing.assert_allclose(fit.predict(phi), phi @ fit.coef_ + fit.intercept_)


def test_cv_is_deterministic_for_a_seed():
    phi, y, _, _ = planted(N_HEADS, 80, "cs_bernoulli", 0.05, 9, noise=0.05)
    a = LassoRecovery(random_state=3).fit(phi, y)
    b = LassoRecovery(random_state=3).fit(phi, y)
    assert a.alpha_ == b.alpha_ and np.array_equal(a.coef_, b.coef_)


def test_zero_coefficients_are_ranked_by_marginal_effect():
    phi, y, _, _ = planted(60, 40, "cs_stratified", 0.1, 4)
    fit = LassoRecovery(alpha=10.0).fit(phi, y)  # huge penalty: every coefficient is zero
    assert not fit.coef_.any()
    # by hand: mean score of the masks that ablate the head minus that of the masks that don't
    effect = [y[phi[:, j] == 1].mean() - y[phi[:, j] == 0].mean() for j in range(60)]
    assert fit.ranking_.tolist() == sorted(range(60), key=lambda j: (effect[j], j))


def test_zero_coefficient_ties_by_hand():
    phi = np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]])
    y = np.array([0.5, 0.9, 0.4, 1.0])
    fit = LassoRecovery(alpha=10.0).fit(phi, y)
    # head 1: 0.45 - 0.95 = -0.5; head 2: 0.65 - 0.75 = -0.1; heads 0 and 3 never vary: 0, by index
    assert not fit.coef_.any() and fit.ranking_.tolist() == [1, 2, 0, 3]


def test_marginal_effects_by_hand():
    phi = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    y = np.array([0.2, 0.4, 0.9, 1.0])
    np.testing.assert_allclose(marginal_effects(phi, y), [0.3 - 0.95, 0.65 - 0.6])


def test_single_head_recovery_is_the_drop_from_baseline():
    phi = np.vstack([np.zeros((1, 4)), np.eye(4)])
    y = np.array([0.9, 0.8, 0.2, 0.9, 0.5])
    fit = SingleHeadRecovery().fit(phi, y)
    np.testing.assert_allclose(fit.coef_, [-0.1, -0.7, 0.0, -0.4])
    assert fit.top_k(2).tolist() == [1, 3] and fit.n_evals_ == 5
    with pytest.raises(ValueError, match="zero row followed by the identity"):
        fit.fit(np.eye(4), y[:4])


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="alpha must be"):
        LassoRecovery(alpha="big").fit(np.eye(3), np.ones(3))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        LassoRecovery(alpha=0.1).fit(np.eye(3), np.ones(4))
    fit = LassoRecovery(alpha=0.1).fit(np.eye(3), np.ones(3))
    with pytest.raises(ValueError, match=r"k must lie in 1..3"):
        fit.top_k(4)


@parametrize_with_checks([LassoRecovery(alpha=0.01), LassoRecovery(alpha="cv", random_state=0)])
def test_follows_the_scikit_learn_estimator_contract(estimator, check):
    """No deliberate deviations: every check of check_estimator passes."""
    check(estimator)


def test_top_k_probability_separates_settled_from_unsettled_heads():
    from headloc.search.recovery import top_k_probability

    rng = np.random.default_rng(1)
    phi = (rng.random((120, 40)) < 0.1).astype(int)
    # heads 5 and 9 carry the task; 20 and 21 have equal, small effects: one top-3 place between them
    y = 0.9 - 0.4 * phi[:, 5] - 0.3 * phi[:, 9] - 0.05 * phi[:, 20] - 0.05 * phi[:, 21]
    y = y + 0.01 * rng.standard_normal(120)
    p = top_k_probability(phi, y, alpha=0.001, k=3, n_boot=60, random_state=0)
    assert p.sum() == pytest.approx(3.0)  # every refit places exactly k heads
    assert p[5] == 1.0 and p[9] == 1.0
    assert p[20] + p[21] == pytest.approx(1.0, abs=0.1) and 0.1 < p[20] < 0.9  # they share the third place
    with pytest.raises(ValueError, match="k must lie in 1..40"):
        top_k_probability(phi, y, alpha=0.001, k=41)
