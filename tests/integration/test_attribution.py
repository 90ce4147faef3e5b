"""Attribution patching against finite differences and true ablations, on tiny real Llamas."""

import math

import numpy as np
import pytest
import torch
from planted import PLANTED, flat, planted_examples, planted_model, reference_score, weakened
from scipy.stats import spearmanr
from transformers import GPT2Config, GPT2LMHeadModel

from headloc.model.ablation import ablate_heads
from headloc.search.attribution import attribution
from headloc.heads import head_name
from headloc.engine.gradient_result import recovery_fields
from headloc.engine.supervision import Example


def random_gpt2(layers=2, heads=4, vocab=50):
    """GPT-2 computes in the model's dtype throughout (Llama's RMSNorm drops to float32), so in
    float64 a finite difference resolves the gradient to many digits."""
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab, n_embd=32, n_layer=layers, n_head=heads, n_positions=64,
                        initializer_range=0.2, pad_token_id=0)  # large weights: visibly non-linear gates
    return GPT2LMHeadModel(config).eval().double()


def random_examples(n=7, vocab=50, seed=3):
    """Contexts and gold continuations of different lengths, so batches need padding."""
    rng = np.random.default_rng(seed)
    return [Example(i, tuple(rng.integers(3, vocab, rng.integers(3, 9)).tolist()),
                    tuple(rng.integers(3, vocab, rng.integers(1, 4)).tolist())) for i in range(n)]


def test_attribution_equals_a_finite_difference_of_each_gate():
    model, examples = random_gpt2(), random_examples()
    result = attribution(model, examples, batch_size=3)  # 3 batches, left-padded
    base = reference_score(model, examples)
    assert result.baseline == pytest.approx(base, rel=1e-6)
    eps = 2.0 ** -16  # exact in float32, the dtype HeadAblation keeps gates in
    for head in range(8):
        lower, upper = (torch.ones(2, 4, dtype=torch.float64) for _ in range(2))
        lower.view(-1)[head], upper.view(-1)[head] = 1 - eps, 1 + eps
        below = reference_score(model, examples, lower)
        one_sided = (below - base) / eps  # score change per unit of gate removed
        central = (below - reference_score(model, examples, upper)) / (2 * eps)
        assert result.effects[head] == pytest.approx(one_sided, rel=1e-3, abs=1e-5)
        assert result.effects[head] == pytest.approx(central, rel=1e-5, abs=1e-8)
    # first order only: the estimate is not the full ablation's effect
    removed = [reference_score(model, examples, 1 - torch.eye(8, dtype=torch.float64)[h].view(2, 4)) - base
               for h in range(8)]
    assert not np.allclose(result.effects, removed, rtol=0.05)


def test_beside_a_background_each_estimate_is_the_finite_difference_with_those_heads_ablated():
    """The gradient taken with heads 2 and 5 ablated: each other head's estimate is the score's
    change per unit of its gate there, and it differs from the estimate beside nothing."""
    model, examples = random_gpt2(), random_examples()
    background = [2, 5]
    result = attribution(model, examples, batch_size=3, background=background)
    gate = torch.ones(2, 4, dtype=torch.float64)
    gate.view(-1)[background] = 0.0
    base = reference_score(model, examples, gate)
    assert result.baseline == pytest.approx(base, rel=1e-6)
    eps = 2.0 ** -16
    for head in [0, 1, 3, 4, 6, 7]:
        lower, upper = gate.clone(), gate.clone()
        lower.view(-1)[head], upper.view(-1)[head] = 1 - eps, 1 + eps
        central = (reference_score(model, examples, lower) - reference_score(model, examples, upper)) / (2 * eps)
        assert result.effects[head] == pytest.approx(central, rel=1e-5, abs=1e-8)
    alone = attribution(model, examples, batch_size=3).effects
    assert not np.allclose(np.delete(result.effects, background), np.delete(alone, background), rtol=0.01)


def test_batching_does_not_change_the_estimate():
    model, examples = random_gpt2(), random_examples()
    one = attribution(model, examples, batch_size=len(examples))
    many = attribution(model, examples, batch_size=2)
    np.testing.assert_allclose(one.effects, many.effects, rtol=1e-5, atol=1e-9)
    assert many.cost.fwd_bwd_passes == math.ceil(len(examples) / 2) and one.cost.fwd_bwd_passes == 1


def test_a_gate_that_requires_grad_hooks_every_layer():
    model = random_gpt2(layers=3)
    gate = torch.ones(3, 4, requires_grad=True)
    with ablate_heads(model, gate) as ablation:
        assert len(ablation.hooked) == 3  # an all-ones gate without grad hooks none
    with ablate_heads(model, gate.detach()) as ablation:
        assert ablation.hooked == []


def test_the_planted_head_comes_first_and_estimates_follow_true_ablations():
    model = weakened(planted_model(), 0.2)  # the planted head still solves the task, less saturated
    examples = planted_examples(40)
    result = attribution(model, examples)
    base = reference_score(model, examples)
    true = np.array([reference_score(model, examples, 1 - torch.eye(8)[h].view(2, 4)) - base for h in range(8)])
    planted = flat(*PLANTED)
    assert true.argmin() == planted and true[planted] < -3  # removal destroys the task
    assert result.ranking[0] == planted
    assert spearmanr(result.effects, true).statistic > 0.8
    assert true[planted] < result.effects[planted] < 0  # the linearisation underestimates a big effect


def test_a_saturated_head_is_missed_to_first_order():
    """Known limitation: at full strength the model is so sure that d score/d gate ~ 0."""
    model, examples = planted_model(), planted_examples(40)
    result = attribution(model, examples)
    planted = flat(*PLANTED)
    gate = torch.ones(2, 4)
    gate[PLANTED] = 0
    true = reference_score(model, examples, gate) - reference_score(model, examples)
    assert true < -5
    assert abs(result.effects[planted]) < 1e-3


def test_recovery_fields_name_every_head_and_count_three_evaluations():
    model, examples = random_gpt2(), random_examples()
    fields = recovery_fields(attribution(model, examples, batch_size=4))
    names = [head_name(i, 4) for i in range(8)]
    assert sorted(fields["ranking"]) == sorted(names) and set(fields["coef"]) == set(names)
    coef = [fields["coef"][name] for name in fields["ranking"]]
    assert coef == sorted(coef)  # most negative first
    assert fields["n_evals"] == 3  # one fwd+bwd over every document ~ 3 forward passes
    assert fields["cost"]["fwd_bwd_tokens"] == sum(len(e.context) + len(e.target) - 1 for e in examples)
    assert fields["intercept"] == pytest.approx(reference_score(model, examples), rel=1e-6)
