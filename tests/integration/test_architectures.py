"""Every architecture headloc accepts (SUPPORTED_MODEL_TYPES), built tiny and random from its
model_type alone, ablated through the gate on the output projection that
headloc.model.ablation.output_projections finds, against two references computed without the gate:

* the heads of a random mask removed by zeroing their input columns of that projection's weight;
* every head of layer 0 removed by making the whole attention module return what its projection
  gives for a zero input (its bias): this one needs no head layout and fails if the module found is
  not the attention's last step (a q_proj or an MLP's down projection, say).
"""

import numpy as np
import pytest
import torch
from architectures import VOCAB, attention_replaced_by_bias, tiny_decoder, zeroed_columns

from headloc.model.ablation import HeadGeometry, ablate_heads, masks_to_gate, output_projections
from headloc.model.architectures import SUPPORTED_MODEL_TYPES

# BLOOM's attention module adds the residual stream itself (dropout_add inside BloomAttention), so
# replacing its whole output is no reference there; the column reference still checks it.
RESIDUAL_INSIDE_ATTENTION = {"bloom"}
BEFORE = {"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3", "phi", "gpt2", "gpt_neox"}  # the hand list


def test_the_ten_of_the_old_hand_list_are_still_supported():
    assert BEFORE <= SUPPORTED_MODEL_TYPES and len(SUPPORTED_MODEL_TYPES) == 91


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
