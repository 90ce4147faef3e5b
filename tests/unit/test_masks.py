import numpy as np
import pytest

from headloc.methods import make_masks
from headloc.search.masks import single_head_masks


@pytest.mark.parametrize("n_heads,n_masks,sparsity", [(270, 100, 0.05), (1024, 200, 0.01), (50, 37, 0.3), (16, 9, 0.5)])
def test_stratified_balances_every_head(n_heads, n_masks, sparsity):
    phi = make_masks(n_heads, n_masks, method="cs_stratified", sparsity=sparsity, random_state=3)
    assert phi.shape == (n_masks, n_heads) and set(np.unique(phi)) <= {0, 1}
    counts = phi.sum(axis=0)
    assert counts.max() - counts.min() <= 1, "every head ablated an almost equal number of times"
    per_row = max(1, round(sparsity * n_heads))
    assert (phi.sum(axis=1) == per_row).all()
    assert counts.sum() == per_row * n_masks


def test_bernoulli_has_the_requested_density():
    phi = make_masks(500, 400, method="cs_bernoulli", sparsity=0.05, random_state=0)
    assert abs(phi.mean() - 0.05) < 0.003  # 200,000 draws: sd of the mean ~0.0005
    assert phi.sum(axis=0).std() > 1, "columns vary by chance, unlike stratified"


@pytest.mark.parametrize("method", ["cs_stratified", "cs_bernoulli"])
def test_seeded_and_deterministic(method):
    a = make_masks(270, 50, method=method, sparsity=0.05, random_state=7)
    b = make_masks(270, 50, method=method, sparsity=0.05, random_state=7)
    c = make_masks(270, 50, method=method, sparsity=0.05, random_state=8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_no_global_random_state_is_used():
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    make_masks(100, 20, method="cs_bernoulli", sparsity=0.1, random_state=1)
    assert np.random.random() == before


def test_single_head_masks():
    phi = single_head_masks(5)
    assert phi.shape == (6, 5)
    assert not phi[0].any() and np.array_equal(phi[1:], np.eye(5))
    assert np.array_equal(make_masks(5, method="greedy1s"), phi)


@pytest.mark.parametrize("kwargs,message", [
    (dict(method="cs_magic", sparsity=0.1), "unknown search method 'cs_magic'"),
    (dict(method="cs_stratified", sparsity=0.0), r"sparsity must lie in \(0, 1\)"),
    (dict(method="cs_bernoulli", sparsity=1.5), r"sparsity must lie in \(0, 1\)"),
])
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_masks(10, 5, **kwargs)
    with pytest.raises(ValueError, match="n_masks must be a positive integer"):
        make_masks(10, 0, method="cs_stratified", sparsity=0.1)
