"""Layers a mask group agrees on, run once per document (headloc.engine.shared_layers): on every
architecture headloc ablates, each row's logits equal its own full pass with its own gate; where
a model does not let its layers stand aside, the first check says so and no pass shares again.
"""

import logging

import pytest
import torch

from architectures import VOCAB, tiny_decoder
from headloc.engine.shared_layers import SharedLayers, first_difference
from headloc.heads import HeadGeometry
from headloc.model.ablation import ablate_heads
from headloc.model.architectures import SUPPORTED_MODEL_TYPES

MASKS, DOCS = 3, 2
# the architectures whose layers return more than their hidden states (a pair), so that a layer
# standing aside breaks the model's loop: the first check finds out (transformers 5.23)
NO_SHARING = {"hy_v4", "zaya"}


def group_gate(model) -> torch.Tensor:
    """Three masks that ablate the same head of layer 0 and differ in the last layer."""
    geometry = HeadGeometry.of(model.config)
    gate = torch.ones(MASKS, geometry.n_layers, geometry.n_heads)
    gate[:, 0, 1] = 0
    gate[1, -1, 0] = 0
    gate[2, -1, 2:] = 0
    return gate


def full_pass(model, docs, gate):
    """Every (document, mask) row through every layer, row r gated by mask r % MASKS."""
    rows = docs.repeat_interleave(MASKS, dim=0)
    with torch.no_grad(), ablate_heads(model, gate.repeat(len(docs), 1, 1)):
        return model(rows, use_cache=False).logits


def shared_pass(model, shared, docs, gate):
    with torch.no_grad():
        return shared.logits(docs, MASKS, first_difference(gate), lambda rows: model(rows, use_cache=False).logits,
                             lambda: ablate_heads(model, gate[0]),
                             lambda rows: ablate_heads(model, gate.repeat(len(rows) // MASKS, 1, 1)))


def rows_through(layer):
    """The rows of each pass through ``layer``."""
    seen = []
    handle = layer.register_forward_pre_hook(lambda module, args, kwargs: seen.append(
        (args[0] if args else kwargs["hidden_states"]).shape[0]), with_kwargs=True)
    return seen, handle


@pytest.mark.parametrize("model_type", sorted(SUPPORTED_MODEL_TYPES))
def test_every_row_gets_its_own_full_pass_logits(model_type, caplog):
    model = tiny_decoder(model_type)
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(0))
    gate = group_gate(model)
    assert first_difference(gate) == HeadGeometry.of(model.config).n_layers - 1
    expected = full_pass(model, docs, gate)
    shared = SharedLayers(model)
    with caplog.at_level(logging.WARNING, logger="headloc"):
        checked = shared_pass(model, shared, docs, gate)
    torch.testing.assert_close(checked, expected)  # the check returns the full pass
    kept = shared.layers is not None
    assert kept == (model_type not in NO_SHARING), caplog.text
    assert kept == ("masks share no layers on this model" not in caplog.text)
    if kept:
        seen, handle = rows_through(shared.layers[0])
        try:
            again = shared_pass(model, shared, docs, gate)
        finally:
            handle.remove()
        torch.testing.assert_close(again, expected, rtol=1e-4, atol=1e-5)
        assert seen == [DOCS]  # layer 0 ran once per document, not once per (document, mask)
        assert shared.layers is not None


def test_a_group_that_agrees_on_no_layer_runs_one_full_pass():
    model = tiny_decoder("llama")
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(1))
    gate = group_gate(model)
    gate[2, 0, 0] = 0  # the third mask differs in layer 0 too
    assert first_difference(gate) == 0
    shared = SharedLayers(model)
    seen, handle = rows_through(shared.layers[0])
    try:
        got = shared_pass(model, shared, docs, gate)
    finally:
        handle.remove()
    torch.testing.assert_close(got, full_pass(model, docs, gate))
    assert seen == [DOCS * MASKS] and not shared.checked


def test_a_lone_mask_runs_one_full_pass():
    """A group of one mask has nothing to share: one pass, no check."""
    model = tiny_decoder("llama")
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(3))
    gate = group_gate(model)[1:2]
    shared = SharedLayers(model)
    seen, handle = rows_through(shared.layers[0])
    try:
        with torch.no_grad():
            got = shared.logits(docs, 1, first_difference(gate), lambda rows: model(rows, use_cache=False).logits,
                                lambda: ablate_heads(model, gate[0]), lambda rows: ablate_heads(model, gate[0]))
        with torch.no_grad(), ablate_heads(model, gate[0]):
            expected = model(docs, use_cache=False).logits
    finally:
        handle.remove()
    torch.testing.assert_close(got, expected)
    assert seen == [DOCS, DOCS] and not shared.checked  # its pass, then the reference's


def test_running_out_of_memory_on_the_first_shared_pass_is_left_to_the_back_off():
    """An out-of-memory error is the caller's to retry with fewer rows (headloc.engine.backoff): it
    is raised, and the model is checked on the next try rather than set to never share."""
    model = tiny_decoder("llama")
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(2))
    gate = group_gate(model)
    shared = SharedLayers(model)

    def full_memory(module, args, kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory (a test's)")

    handle = shared.layers[-1].register_forward_pre_hook(full_memory, with_kwargs=True)
    try:
        with pytest.raises(torch.OutOfMemoryError):
            shared_pass(model, shared, docs, gate)
    finally:
        handle.remove()
    assert shared.layers is not None and not shared.checked
    torch.testing.assert_close(shared_pass(model, shared, docs, gate), full_pass(model, docs, gate))
    assert shared.checked and shared.layers is not None
