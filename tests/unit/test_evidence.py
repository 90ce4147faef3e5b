"""headloc.search.evidence (and evidence_record): each head's interval and P(top k) from resampled documents,
checked against normal theory computed here; "nothing found" for scores that do not move, a model at the floor and
heads that do nothing; the multiple-comparison correction; and the checks that keep a value from
being called measured when it is not the difference it claims to be."""

from __future__ import annotations

import numpy as np
import pytest

from headloc.search.evidence import (
    assess,
    contrast,
    in_top_k,
    not_assessed,
    threshold,
)
from headloc.search.evidence_record import extend_per_doc, measured_pairs, of_record


def paired_world(effects, n_docs=60, noise=0.3, seed=0):
    """An unablated row, then one row per head with that head alone ablated: each document's score
    drops by the head's effect plus its own noise. Returns masks, per-document scores and the true
    per-head mean changes on these documents."""
    rng = np.random.default_rng(seed)
    base = 1.0 + 0.5 * rng.standard_normal(n_docs)
    rows = [base] + [base + e + noise * rng.standard_normal(n_docs) for e in effects]
    masks = np.vstack([np.zeros(len(effects), dtype=np.int8), np.eye(len(effects), dtype=np.int8)])
    per_doc = np.vstack(rows)
    return masks, per_doc, per_doc[1:].mean(axis=1) - per_doc[0].mean()


def alone(n):
    return {h: ((h,), ()) for h in range(n)}


def test_an_interval_matches_normal_theory_for_a_paired_difference():
    masks, per_doc, coef = paired_world([-0.5, 0.0], n_docs=200)
    found = of_record(masks, per_doc.mean(axis=1), per_doc, coef, alone(2), top_k=1, seed=0)
    diffs = per_doc[1] - per_doc[0]
    half = 1.96 * diffs.std(ddof=1) / np.sqrt(len(diffs))  # the textbook paired interval
    assert found.low[0] == pytest.approx(coef[0] - half, abs=0.25 * half)
    assert found.high[0] == pytest.approx(coef[0] + half, abs=0.25 * half)
    assert found.status == ("measured", "measured")
    assert found.found == (0,) and found.reason == ""
    assert found.p_top_k[0] == 1.0 and found.p_top_k[1] < 0.6


def test_a_head_that_does_nothing_is_not_found():
    masks, per_doc, coef = paired_world([-0.6, 0.0, 0.0])
    found = of_record(masks, per_doc.mean(axis=1), per_doc, coef, alone(3), top_k=2, seed=1)
    assert found.found == (0,)
    assert found.low[1] < 0 < found.high[1]


def test_scores_that_never_move_find_nothing_and_say_why():
    per_doc = np.tile(np.array([1.0, 0.0, 0.0, 0.0]), (4, 1))  # every set scores 0.25
    masks = np.vstack([np.zeros(3, dtype=np.int8), np.eye(3, dtype=np.int8)])
    found = of_record(masks, per_doc.mean(axis=1), per_doc, np.zeros(3), alone(3), top_k=1, seed=0)
    assert found.found == ()
    assert "do not vary over the 4 head sets" in found.reason and "0.25" in found.reason
    fields = found.fields(["A", "B", "C"], np.zeros(3))
    assert fields["found"] == [] and fields["p_top_k"] == {"A": None, "B": None, "C": None}


def test_a_model_at_the_floor_has_nothing_to_damage():
    """The unablated model gets every document wrong; a mask that happens to get one right is no
    head that carries the task."""
    per_doc = np.zeros((3, 10))
    per_doc[2, 3] = 1.0
    masks = np.vstack([np.zeros(2, dtype=np.int8), np.eye(2, dtype=np.int8)])
    coef = per_doc[1:].mean(axis=1) - per_doc[0].mean()
    found = of_record(masks, per_doc.mean(axis=1), per_doc, coef, alone(2), top_k=1, seed=0)
    assert found.found == () and "floor" in found.reason and "every one of the 10 documents" in found.reason


def test_many_null_heads_find_none_where_an_uncorrected_test_finds_several():
    """200 heads of pure noise: a plain one-sided 95 % test calls about 10 of them; the correction
    for the 200 heads assessed calls (almost) none."""
    masks, per_doc, coef = paired_world([0.0] * 200, n_docs=40, noise=0.5, seed=3)
    found = of_record(masks, per_doc.mean(axis=1), per_doc, coef, alone(200), top_k=5, seed=0)
    sd = (found.high - found.low) / (2 * 1.96)
    uncorrected = int(np.sum(coef / sd < -1.645))
    assert uncorrected >= 4
    assert len(found.found) <= 1
    assert found.z == pytest.approx(threshold(200)) and found.z > 3.4
    assert "clears the noise" in found.reason or len(found.found) == 1


def test_without_per_document_scores_nothing_is_assessed():
    masks, per_doc, coef = paired_world([-0.5])
    found = of_record(masks, per_doc.mean(axis=1), None, coef, alone(1), top_k=1, seed=0)
    assert found.found is None and found.reason.startswith("not assessed")
    assert np.isnan(found.low).all() and found.noise is None
    fields = not_assessed(["A", "B"], "estimated", "a gradient")
    assert fields["found"] is None and fields["status"] == {"A": "estimated", "B": "estimated"}
    assert fields["no_head_found"] == "not assessed: a gradient"


def test_a_value_that_is_not_the_difference_it_claims_is_not_measured():
    masks, per_doc, coef = paired_world([-0.5, -0.4])
    y = per_doc.mean(axis=1)
    wrong = coef.copy()
    wrong[1] += 0.1  # e.g. a group's drop with a correction: not the two rows' difference
    assert measured_pairs(masks, y, wrong, alone(2)) == {0: (1, 0)}
    found = of_record(masks, y, per_doc, wrong, alone(2), top_k=1, seed=0)
    assert found.status == ("measured", "estimated")
    assert np.isnan(found.low[1])  # an estimate gets no interval it was not measured for


def test_heads_no_set_ablated_are_unmeasured_and_never_in_the_top_k():
    masks, per_doc, coef = paired_world([-0.5, -0.3])
    masks = np.hstack([masks, np.zeros((3, 1), dtype=np.int8)])
    coef = np.append(coef, 0.0)
    found = of_record(masks, per_doc.mean(axis=1), per_doc, coef, alone(2), top_k=2, seed=0)
    assert found.status[2] == "unmeasured" and np.isnan(found.p_top_k[2])


def test_the_noise_floor_is_the_unablated_scores_spread():
    masks, per_doc, coef = paired_world([-0.5], n_docs=400)
    found = of_record(masks, per_doc.mean(axis=1), per_doc, coef, alone(1), top_k=1, seed=0)
    expected = 1.96 * per_doc[0].std(ddof=1) / np.sqrt(400)
    assert found.noise == pytest.approx(expected, rel=0.2)


def test_a_fit_is_refit_on_each_resample():
    """A values function that is a fit (here the mean of two sets) is called on every resample."""
    per_doc = np.vstack([np.ones(30), np.linspace(0, 1, 30)])
    calls = []

    def values(y):
        calls.append(y.copy())
        return np.array([y[1] - y[0]])

    found = assess(np.array([per_doc[1].mean() - 1]), ["estimated"], per_doc, values, baseline_row=0, top_k=1,
                   seed=0, n_boot=50)
    assert len(calls) == 50 and found.found == (0,)


def test_in_top_k_counts_only_damage_and_breaks_ties_by_index():
    draws = np.array([[-1.0, -1.0, 0.5], [0.0, -2.0, -0.1]])
    assert in_top_k(draws, 1).tolist() == [0.5, 0.5, 0.0]
    assert in_top_k(draws, 3).tolist() == [0.5, 1.0, 0.5]


def test_per_document_scores_are_kept_only_while_every_row_has_them():
    first = extend_per_doc(None, 0, np.ones((2, 3)))
    assert first.shape == (2, 3)
    assert extend_per_doc(first, 2, np.zeros((1, 3))).shape == (3, 3)
    assert extend_per_doc(first, 2, None) is None
    assert extend_per_doc(first, 2, np.zeros((1, 4))) is None
    assert extend_per_doc(None, 2, np.zeros((1, 3))) is None


def test_a_bad_status_is_refused():
    with pytest.raises(ValueError, match="status must give one of"):
        assess(np.zeros(2), ["measured", "guessed"], np.ones((2, 3)), lambda y: np.zeros(2), baseline_row=0,
               top_k=1, seed=0)


def test_contrast_recomputes_only_its_heads():
    values = contrast({1: (2, 0)}, np.array([5.0, 0.0]))
    assert values(np.array([1.0, 9.0, 0.25])).tolist() == [5.0, -0.75]


def test_the_noise_floor_is_read_from_the_unablated_row_wherever_it_stands():
    """A record whose unablated set was scored second: its spread, not the first set's, is the floor."""
    rng = np.random.default_rng(3)
    unablated = 1.0 + 0.5 * rng.standard_normal(80)
    per_doc = np.vstack([np.full(80, 0.2), unablated])  # the ablated set first, the same on every document
    masks = np.array([[1, 0], [0, 0]], dtype=np.int8)
    found = of_record(masks, per_doc.mean(axis=1), per_doc, np.array([-0.8, 0.0]), {0: ((0,), ())}, top_k=1, seed=0)
    expected = 1.96 * unablated.std(ddof=1) / np.sqrt(80)  # the mean's 95 % half-width, normal theory
    assert found.noise == pytest.approx(expected, rel=0.25)
