"""Gates on output projections equal zeroing the heads' input columns, on every architecture."""

import copy

import numpy as np
import pytest
import torch
import transformers as tf

from headloc.model.ablation import HeadGeometry, ablate_heads, masks_to_gate
from headloc.model.architectures import SUPPORTED_MODEL_TYPES
from headloc.model.projections import output_projections

VOCAB = 101
SMALL = dict(vocab_size=VOCAB, num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=128)

ARCHITECTURES = {
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2)),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2)),
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2)),
    # Gemma: head_dim (16) differs from hidden_size / heads (8): the gate must use the projection width.
    "gemma": (tf.GemmaConfig, tf.GemmaForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=1, head_dim=16)),
    # Gemma 2 and Qwen 3: other attention code (soft-capping and sliding windows; q/k norms), and
    # head_dim (16) again differs from hidden_size / heads.
    "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2, head_dim=16)),
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2, head_dim=16)),
    "phi3": (tf.Phi3Config, tf.Phi3ForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2, pad_token_id=0)),
    # Phi (1/2): the output projection is called `dense`, and rotary embeddings cover half of a head.
    "phi": (tf.PhiConfig, tf.PhiForCausalLM, dict(hidden_size=32, intermediate_size=48, num_key_value_heads=2)),
    "gpt2": (tf.GPT2Config, tf.GPT2LMHeadModel, dict(n_embd=32, n_layer=3, n_head=4, n_positions=128)),
    "gpt_neox": (tf.GPTNeoXConfig, tf.GPTNeoXForCausalLM, dict(hidden_size=32, intermediate_size=48)),
}


NO_SDPA = {"gemma2"}  # transformers refuses SDPA attention for these (soft-capping)

# Each architecture's attention output projection, spelled here independently of output_projections, so
# that a hook on the wrong module (a q_proj, say) cannot agree with its own reference.
OUTPUT_PROJECTION = {"gpt2": "transformer.h.{layer}.attn.c_proj", "gpt_neox": "gpt_neox.layers.{layer}.attention.dense",
                     "phi": "model.layers.{layer}.self_attn.dense"}
DEFAULT_OUTPUT_PROJECTION = "model.layers.{layer}.self_attn.o_proj"


def build(arch, attn="eager"):
    config_cls, model_cls, extra = ARCHITECTURES[arch]
    options = {**SMALL, **extra}
    if arch == "gpt2":
        options = {k: v for k, v in options.items() if k not in ("num_hidden_layers", "num_attention_heads", "max_position_embeddings")}
    torch.manual_seed(0)
    return model_cls(config_cls(**options, attn_implementation=attn)).eval()


def zero_heads(model, mask):
    """Independent reference: a copy whose output projections ignore the ablated heads' inputs."""
    reference = copy.deepcopy(model)
    geometry = HeadGeometry.of(model.config)
    for index in np.flatnonzero(mask):
        layer, head = divmod(int(index), geometry.n_heads)
        path = OUTPUT_PROJECTION.get(arch_of(model), DEFAULT_OUTPUT_PROJECTION).format(layer=layer)
        proj = reference.get_submodule(path)
        weight = proj.weight.data
        conv1d = arch_of(model) == "gpt2"  # Conv1D stores (in, out)
        width = weight.shape[0] if conv1d else weight.shape[1]
        d = width // geometry.n_heads
        if conv1d:
            weight[head * d:(head + 1) * d, :] = 0
        else:
            weight[:, head * d:(head + 1) * d] = 0
    return reference


def arch_of(model):
    return model.config.model_type


def random_mask(geometry, seed, p=0.3):
    rng = np.random.default_rng(seed)
    mask = (rng.random(geometry.total) < p).astype(int)
    mask[seed % geometry.total] = 1
    return mask


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def arch(request):
    return request.param


def test_every_architecture_is_supported_and_found_where_named_here():
    """The ten architectures of headloc's former hand list, each with its projection spelled here
    (every other supported architecture: tests/integration/test_architectures.py)."""
    assert set(ARCHITECTURES) <= SUPPORTED_MODEL_TYPES
    for arch in ARCHITECTURES:
        model = build(arch)
        assert model.config.model_type == arch
        assert output_projections(model) == [OUTPUT_PROJECTION.get(arch, DEFAULT_OUTPUT_PROJECTION).format(layer=layer)
                                             for layer in range(3)]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gate_equals_zeroed_columns(arch, attn):
    if attn == "sdpa" and arch in NO_SDPA:
        pytest.skip(f"transformers has no SDPA attention for {arch}")
    model = build(arch, attn)
    geometry = HeadGeometry.of(model.config)
    mask = random_mask(geometry, 1)
    ids = torch.randint(3, VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = zero_heads(model, mask)(ids).logits
        plain = model(ids).logits
        with ablate_heads(model, masks_to_gate(mask, geometry)):
            gated = model(ids).logits
    assert not torch.allclose(plain, expected, atol=1e-4), "the ablation must change something"
    torch.testing.assert_close(gated, expected, atol=1e-5, rtol=1e-5)


def test_batched_gate_rows_equal_separate_passes(arch):
    model = build(arch)
    geometry = HeadGeometry.of(model.config)
    masks = np.stack([random_mask(geometry, s) for s in range(3)])
    ids = torch.randint(3, VOCAB, (1, 10), generator=torch.Generator().manual_seed(1)).repeat(3, 1)
    with torch.no_grad():
        with ablate_heads(model, masks_to_gate(masks, geometry)):
            batched = model(ids).logits
        for i, mask in enumerate(masks):
            with ablate_heads(model, masks_to_gate(mask, geometry)):
                single = model(ids[i:i + 1]).logits
            torch.testing.assert_close(batched[i:i + 1], single, atol=1e-5, rtol=1e-5)


def test_kv_cache_generation_equals_zeroed_model(arch):
    model = build(arch)
    geometry = HeadGeometry.of(model.config)
    mask = random_mask(geometry, 2)
    reference = zero_heads(model, mask)
    ids = torch.randint(3, VOCAB, (2, 6), generator=torch.Generator().manual_seed(2))
    options = dict(max_new_tokens=8, do_sample=False, use_cache=True, pad_token_id=0,
                   output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = reference.generate(ids, attention_mask=torch.ones_like(ids), **options)
        with ablate_heads(model, masks_to_gate(mask, geometry)):
            got = model.generate(ids, attention_mask=torch.ones_like(ids), **options)
    assert torch.equal(got.sequences, expected.sequences)
    torch.testing.assert_close(torch.stack(got.scores), torch.stack(expected.scores), atol=1e-4, rtol=1e-4)


def test_left_padding_equals_zeroed_model(arch):
    model = build(arch)
    geometry = HeadGeometry.of(model.config)
    mask = random_mask(geometry, 3)
    ids = torch.randint(3, VOCAB, (2, 9), generator=torch.Generator().manual_seed(3))
    attention = torch.ones_like(ids)
    attention[0, :4] = 0  # row 0 is left-padded
    positions = (attention.cumsum(-1) - 1).clamp(min=0)  # GPT-2 does not derive these itself
    inputs = dict(input_ids=ids, attention_mask=attention, position_ids=positions)
    with torch.no_grad():
        expected = zero_heads(model, mask)(**inputs).logits
        with ablate_heads(model, masks_to_gate(mask, geometry)):
            gated = model(**inputs).logits
    real = attention.bool()
    torch.testing.assert_close(gated[real], expected[real], atol=1e-5, rtol=1e-5)


def test_hooks_are_removed_on_exit_and_on_error():
    model = build("llama")
    geometry = HeadGeometry.of(model.config)
    ids = torch.randint(3, VOCAB, (1, 8), generator=torch.Generator().manual_seed(4))
    gate = masks_to_gate(random_mask(geometry, 0), geometry)
    with torch.no_grad():
        before = model(ids).logits
        with ablate_heads(model, gate) as ablation:
            assert ablation.hooked and "blocks." in repr(ablation)
        with pytest.raises(RuntimeError):
            with ablate_heads(model, gate):
                raise RuntimeError("boom")
        after = model(ids).logits
    assert not any(m._forward_pre_hooks for m in model.modules())
    torch.testing.assert_close(before, after)


def test_unablated_layers_are_not_hooked():
    model = build("llama")
    geometry = HeadGeometry.of(model.config)
    mask = np.zeros(geometry.total, dtype=int)
    mask[geometry.n_heads + 2] = 1  # L1H2 only
    with ablate_heads(model, masks_to_gate(mask, geometry)) as ablation:
        assert ablation.hooked == ["blocks.1.attn.hook_z"]


def test_bad_gates_and_models_raise():
    model = build("llama")
    with pytest.raises(ValueError, match="gate shape"):
        ablate_heads(model, torch.ones(2, 4))
    with pytest.raises(ValueError, match="270 entries"):
        masks_to_gate(np.zeros(270), HeadGeometry.of(model.config))
    geometry = HeadGeometry.of(model.config)
    with pytest.raises(ValueError, match="one mask per batch row"):
        with ablate_heads(model, masks_to_gate(np.ones((3, geometry.total)), geometry)):
            model(torch.ones(2, 4, dtype=torch.long))
    from architectures import tiny_decoder

    mamba = tiny_decoder("mamba")  # no attention: nothing to gate, so nothing is hooked silently
    shape = HeadGeometry.of(mamba.config)
    with pytest.raises(ValueError, match="cannot locate the attention output projections of model_type 'mamba'"):
        with ablate_heads(mamba, torch.zeros(shape.n_layers, shape.n_heads)):
            pass
