"""Every architecture headloc accepts (SUPPORTED_MODEL_TYPES), built tiny and random from its
model_type alone, ablated through the gate on the output projection that
headloc.model.projections.output_projections finds, against two references computed without the gate:

* the heads of a random mask removed by zeroing their input columns of that projection's weight;
* every head of layer 0 removed by making the whole attention module return what its projection
  gives for a zero input (its bias): this one needs no head layout and fails if the module found is
  not the attention's last step (a q_proj or an MLP's down projection, say).
"""

import copy
import re

import numpy as np
import pytest
import torch
from architectures import VOCAB, attention_replaced_by_bias, tiny_decoder, zeroed_columns
from conftest import REPO, accuracy_demo

from headloc.model.ablation import HeadGeometry, ablate_heads, masks_to_gate
from headloc.model.architectures import REFUSED, SUPPORTED_MODEL_TYPES
from headloc.model.loading import load_model
from headloc.model.projections import output_projections
from headloc.workflow.config import check_workflow_config

# BLOOM's attention module adds the residual stream itself (dropout_add inside BloomAttention), so
# replacing its whole output is no reference there; the column reference still checks it.
RESIDUAL_INSIDE_ATTENTION = {"bloom"}
BEFORE = {"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3", "phi", "gpt2", "gpt_neox"}  # the hand list


def test_the_ten_of_the_old_hand_list_are_still_supported():
    assert BEFORE <= SUPPORTED_MODEL_TYPES and len(SUPPORTED_MODEL_TYPES) == 89
    assert not SUPPORTED_MODEL_TYPES & set(REFUSED)


@pytest.mark.parametrize("model_type", sorted(SUPPORTED_MODEL_TYPES))
def test_gates_equal_an_independent_ablation(model_type):
    model = tiny_decoder(model_type)
    geometry = HeadGeometry.of(model.config)
    projections = output_projections(model)
    ids = torch.randint(3, VOCAB, (1, 6), generator=torch.Generator().manual_seed(0))
    mask = (np.random.default_rng(0).random(geometry.total) < 0.4).astype(int)
    mask[1] = 1
    layer0 = np.zeros(geometry.total, dtype=int)
    layer0[: geometry.n_heads] = 1
    with torch.no_grad():
        base = model(ids).logits
        with ablate_heads(model, masks_to_gate(mask, geometry)):
            gated = model(ids).logits
        torch.testing.assert_close(gated, zeroed_columns(model, projections, mask, geometry.n_heads)(ids).logits,
                                   atol=1e-5, rtol=1e-4)
        assert not torch.allclose(gated, base, atol=1e-4), "the gate changed nothing: its hook never ran"
        if model_type in RESIDUAL_INSIDE_ATTENTION:
            return
        with ablate_heads(model, masks_to_gate(layer0, geometry)):
            gated = model(ids).logits
        handle = attention_replaced_by_bias(model, projections[0].rsplit(".", 1)[0], projections[0])
        try:
            reference = model(ids).logits
        finally:
            handle.remove()
        torch.testing.assert_close(gated, reference, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("model_type, found", [
    ("bart", "layer 0: ['model.decoder.layers.0.self_attn.out_proj'"),  # decoder of an encoder-decoder: found, but
    ("mamba", "found none"),                                            # no attention at all
    ("bert", "found none"),                                             # an encoder's attention.output.dense
])
def test_what_has_no_per_head_attention_output_is_refused(model_type, found):
    model = tiny_decoder(model_type)
    with pytest.raises(ValueError, match=f"cannot locate the attention output projections of model_type "
                                         f"'{model_type}'") as error:
        output_projections(model)
    assert found in str(error.value)


# ---------------------------------------------------------------- heads that are not the projection's slices


def saved(model, folder, tokenizer):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def config_with_model(folder) -> dict:
    config = copy.deepcopy(accuracy_demo())
    config["models"] = {"mine": {"source": str(folder)}}
    return config


@pytest.mark.parametrize("model_type, reason, when_loaded", [
    ("diffllama", "its attention is differential: o_proj reads num_attention_heads / 2 heads of width 2 x head_dim",
     "its attention is differential"),
    ("inkling2_text", "its sliding-window layers build their heads from swa_num_attention_heads and swa_head_dim",
     "layer 0 (model.layers.0.self_attn.o_proj) has 48 heads of width 128"),
])
def test_a_model_type_whose_heads_are_not_the_gated_slices_is_refused_at_parse_and_load(
        model_type, reason, when_loaded, tmp_path, tokenizer, monkeypatch):
    """DiffLlama's o_proj reads H/2 differential heads of width 2 x head_dim, so headloc's head L1H2
    would be half of one (its widths match: only its model type tells); Inkling2's sliding layers have
    their own heads. Both are refused before any job (the config check reads config.json) with the
    reason, and when loaded (load_model, the jobs' and the CLI's loader)."""
    folder = saved(tiny_decoder(model_type), tmp_path / model_type, tokenizer)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        check_workflow_config(config_with_model(folder), REPO / "config/schema.yaml")
    assert str(error.value).startswith(f"config models.mine.source: {str(folder)!r}: model_type {model_type!r} is "
                                       f"refused: {reason}")
    with pytest.raises(ValueError, match=f"^cannot locate the attention output projections of model_type "
                                         rf"'{model_type}' \(\w+\): {re.escape(when_loaded)}"):
        load_model(str(folder))


def test_a_layer_with_other_heads_than_headloc_counts_is_refused_naming_layer_widths_and_counts(tmp_path, tokenizer):
    """Inkling2's sliding layers hold swa_num_attention_heads heads of width swa_head_dim (48 x 128 =
    6144 values, divisible by the 4 of num_attention_heads): headloc's four "heads" would each be 12
    real ones. The geometry is read from each layer's attention module, so the refusal names the layer,
    its heads and widths, and headloc's count, whatever the model type (the load, a gate, locate)."""
    model = tiny_decoder("inkling2_text")
    text = model.config
    sliding = text.layer_types.index("hybrid_sliding")
    heads, width = text.swa_num_attention_heads, text.swa_head_dim
    assert (heads, width, text.num_attention_heads) == (48, 128, 4)
    expected = (f"layer {sliding} (model.layers.{sliding}.self_attn.o_proj) has {heads} heads of width {width} "
                f"(Inkling2SlidingAttention: {heads * width} values) where its output projection reads "
                f"{heads * width} values and headloc counts 4 heads per layer (the config's num_attention_heads)")
    geometry = HeadGeometry.of(text)
    for refuse in (lambda: output_projections(model),
                   lambda: ablate_heads(model, masks_to_gate(np.eye(geometry.total)[1], geometry)).__enter__()):
        with pytest.raises(ValueError) as error:
            refuse()
        assert expected in str(error.value)
    assert model._forward_pre_hooks == {} and not any(m._forward_pre_hooks for m in model.modules())


def test_an_attention_that_declares_no_geometry_is_refused():
    """Nothing is guessed: an attention module that names neither its heads nor their width (here a
    GPT-2 whose attributes were removed) is refused, where a divisibility check would pass it."""
    model = tiny_decoder("gpt2")
    attention = model.transformer.h[1].attn
    attention.num_heads = attention.head_dim = None
    with pytest.raises(ValueError, match=r"layer 1's attention \(GPT2Attention\) declares neither its number of "
                                         r"heads \(num_heads/num_attention_heads/n_head/n_heads\) nor their width"):
        output_projections(model)



def test_a_projection_wider_than_its_declared_heads_is_refused():
    """Heads times their width must be the projection's input: a GPT-2 layer whose attention declares
    4 heads of width 8 but whose c_proj reads 48 values (12 per gated slice, 4 more than a head's)
    is refused, where the head count alone and divisibility would pass it."""
    from transformers.pytorch_utils import Conv1D

    model = tiny_decoder("gpt2")
    attention = model.transformer.h[0].attn
    attention.c_proj = Conv1D(32, 48)  # Conv1D(out, in)
    assert (attention.num_heads, attention.head_dim) == (4, 8)
    with pytest.raises(ValueError, match=r"layer 0 \(transformer.h.0.attn.c_proj\) has 4 heads of width 8 "
                                         r"\(GPT2Attention: 32 values\) where its output projection reads 48 values"):
        output_projections(model)

def test_bitnet_gates_the_heads_after_attn_sub_norm():
    """Where BitNet's gate sits (docs/configuration.md, 'Your own model'): the gate equals zeroing the
    head's slice of attn_sub_norm's *output*, and differs from zeroing the head before the norm, which
    rescales the other heads; the difference is measured against the ablation's effect."""
    model = tiny_decoder("bitnet")
    geometry = HeadGeometry.of(model.config)
    ids = torch.randint(3, VOCAB, (1, 6), generator=torch.Generator().manual_seed(0))
    layer, head = 1, 2
    norm = model.model.layers[layer].self_attn.attn_sub_norm
    width = norm.weight.shape[0] // geometry.n_heads
    heads = slice(head * width, (head + 1) * width)

    def zeroed(tensor):
        tensor = tensor.clone()
        tensor[..., heads] = 0
        return tensor

    mask = np.zeros(geometry.total, dtype=int)
    mask[layer * geometry.n_heads + head] = 1
    with torch.no_grad():
        base = model(ids).logits
        with ablate_heads(model, masks_to_gate(mask, geometry)):
            gated = model(ids).logits
        handle = norm.register_forward_hook(lambda module, args, output: zeroed(output))
        after = model(ids).logits
        handle.remove()
        handle = norm.register_forward_pre_hook(lambda module, args: (zeroed(args[0]),))
        before = model(ids).logits
        handle.remove()
    torch.testing.assert_close(gated, after, atol=1e-5, rtol=1e-4)
    effect, difference = (gated - base).abs().max().item(), (gated - before).abs().max().item()
    assert 0.01 < difference < effect, (difference, effect)  # docs: 0.02-0.08 against 0.11-0.39
