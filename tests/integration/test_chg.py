"""Causal Head Gating on a tiny Llama whose planted head alone solves a copy task."""

import math

import numpy as np
import pytest
import torch
from planted import N_HEADS, N_LAYERS, PLANTED, flat, planted_examples, planted_model

from headloc.search.chg import chg, mean_pairwise_spearman, rank_by_facilitation
from headloc.heads import head_name
from headloc.engine.gold_scoring import continuation_logprobs, make_batch
from headloc.engine.gradient_result import recovery_fields

FAST = dict(init_steps=60, fit_steps=60, eval_every=10, patience=3)


@pytest.fixture(scope="module")
def fitted():
    torch.manual_seed(0)
    return chg(planted_model(), planted_examples(30), seeds=(0, 1, 2), **FAST)


def test_facilitation_ranks_the_planted_head_first(fitted):
    planted = flat(*PLANTED)
    assert fitted.ranking[0] == planted
    facilitation = np.array([fitted.extra["facilitation"][head_name(i, N_HEADS)] for i in range(8)])
    others = np.delete(facilitation, planted)
    assert facilitation[planted] > 0.2 and facilitation[planted] > 10 * others.max()
    per_seed = np.array(fitted.extra["per_seed"]["g_minus"])
    assert (per_seed.argmax(axis=1) == planted).all()  # every seed on its own agrees


def test_untrained_heads_read_as_irrelevant(fitted):
    """Pushed in (lambda > 0) they mostly stay in, pushed out (lambda < 0) they go: G+ ~ 1, G- ~ 0.

    Not all of them in every seed: the untrained heads add noise, and a seed may find one mildly
    interfering (its gate dropped under both pressures).
    """
    others = [i for i in range(8) if i != flat(*PLANTED)]
    g_plus = np.array(fitted.extra["per_seed"]["g_plus"])[:, others]
    g_minus = np.array(fitted.extra["per_seed"]["g_minus"])[:, others]
    assert g_minus.max() < 0.05
    assert (g_plus > 0.9).mean() > 0.8
    assert np.mean([fitted.extra["irrelevance"][head_name(i, N_HEADS)] for i in others]) > 0.8


def test_held_out_documents_are_never_trained_on_and_stop_the_fits(fitted):
    split = fitted.extra["split"]
    assert len(split["holdout_doc_ids"]) == 6 and len(split["train_doc_ids"]) == 24
    assert not set(split["holdout_doc_ids"]) & set(split["train_doc_ids"])
    for stage in fitted.extra["stages"].values():
        assert all(best <= run <= 60 for best, run in zip(stage["best_step"], stage["steps_run"]))
    assert min(min(stage["steps_run"]) for stage in fitted.extra["stages"].values()) < 60  # some row stopped
    # the gates returned are each row's best on the held-out documents
    held = [e for e in planted_examples(30) if e.doc_id in set(split["holdout_doc_ids"])]
    batch = make_batch(held)
    n_tokens = sum(len(e.target) for e in held)
    for key, stage in (("g_minus", "g_minus"), ("g_plus", "g_plus")):
        gates = torch.tensor(fitted.extra["per_seed"][key], dtype=torch.float32).view(-1, N_LAYERS, N_HEADS)
        with torch.no_grad():
            nll = -continuation_logprobs(planted_model(), batch, gates).sum(dim=(0, 2)) / n_tokens
        np.testing.assert_allclose(nll.numpy(), fitted.extra["stages"][stage]["best_holdout_nll"], rtol=1e-3,
                                   atol=1e-6)


def test_recovery_fields_rank_by_facilitation(fitted):
    fields = recovery_fields(fitted)
    assert fields["ranking"][0] == head_name(flat(*PLANTED), N_HEADS)
    assert fields["coef"] == {name: -value for name, value in fields["facilitation"].items()}
    assert fields["n_evals"] == math.ceil(fields["cost"]["eval_equivalent"] - 1e-9)
    assert set(fields["seed_spearman"]) == {"g_minus", "g_plus"}
    assert len(fields["per_seed"]["g_minus"]) == 3


def test_seed_rows_fit_independently():
    """Three seeds as batch rows give each seed's gates as fitted alone."""
    model, examples = planted_model(), planted_examples(20)
    options = dict(init_steps=20, fit_steps=20, eval_every=5, patience=2)
    together = chg(model, examples, seeds=(4, 5, 6), **options)
    for row, seed in enumerate((4, 5, 6)):
        alone = chg(model, examples, seeds=(seed,), **options)
        for key in ("g_minus", "g_plus", "g_init"):
            np.testing.assert_allclose(together.extra["per_seed"][key][row], alone.extra["per_seed"][key][0],
                                       atol=1e-3)


def test_cost_counts_every_pass_row_and_token():
    model, examples = planted_model(), planted_examples(10)
    tokens = sum(len(e.context) + len(e.target) - 1 for e in examples)  # 6 per document
    result = chg(model, examples, seeds=(0, 1), init_steps=7, fit_steps=5, holdout=0, eval_every=0)
    cost = result.cost
    assert cost.fwd_bwd_passes == 7 + 5 and cost.forward_passes == 0
    assert cost.fwd_bwd_rows == 10 * 2 * 7 + 10 * 4 * 5  # the G+/G- fit has 2 x seeds rows
    assert cost.fwd_bwd_tokens == tokens * (2 * 7 + 4 * 5)
    assert cost.n_evals == math.ceil(3 * cost.fwd_bwd_tokens / tokens)
    capped = chg(model, examples, seeds=(0, 1), init_steps=7, fit_steps=5, holdout=0, eval_every=0,
                 rows_per_pass=8)  # 4 documents x 2 gates, then 2 x 4 gates, per pass
    assert capped.cost.fwd_bwd_passes == 7 * 3 + 5 * 5 and capped.cost.fwd_bwd_rows == cost.fwd_bwd_rows
    np.testing.assert_allclose(capped.extra["per_seed"]["g_minus"], result.extra["per_seed"]["g_minus"], atol=1e-4)


def test_ties_break_on_g_plus_then_head_index():
    g_minus = np.array([[0.5, 0.9, 0.9, 0.9], [0.5, 0.9, 0.9, 0.9]])
    g_plus = np.array([[1.0, 0.8, 0.9, 0.9], [1.0, 0.8, 0.9, 0.9]])
    assert rank_by_facilitation(g_minus, g_plus) == [2, 3, 1, 0]


def test_seed_agreement():
    assert mean_pairwise_spearman(np.array([[1, 2, 3], [2, 3, 4], [3, 2, 1]])) == pytest.approx((1 - 1 - 1) / 3)
    assert mean_pairwise_spearman(np.array([[1.0, 2.0]])) is None


@pytest.mark.parametrize("bad, message", [
    (dict(seeds=()), "seeds must be one or more distinct"),
    (dict(lam=-0.1), "lam is |lambda|"),
    (dict(holdout=1.0), "holdout is a fraction"),
    (dict(init_steps=0), "init_steps must be a positive integer"),
])
def test_bad_hyperparameters_are_named(bad, message):
    with pytest.raises(ValueError, match=message.replace("|", "\\|")):
        chg(planted_model(), planted_examples(4), **bad)


def test_geometry_is_the_models():
    assert (N_LAYERS, N_HEADS) == (2, 4)
