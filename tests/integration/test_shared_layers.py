"""Each layer of a mask group's pass once per document and branch (headloc.engine.shared_layers):
on every architecture headloc ablates, each row's logits, and its keys and values in every layer,
equal its own full pass with its own gate; where a model's layers take their inputs otherwise, the
first check says so and no pass shares again.
"""

import logging

import pytest
import torch

import transformers

from architectures import TINY, VOCAB, tiny_decoder
from headloc.engine.shared_layers import SharedLayers, branches
from headloc.heads import HeadGeometry
from headloc.model.ablation import ablate_heads
from headloc.model.projections import checked_projections
from headloc.model.architectures import SUPPORTED_MODEL_TYPES

MASKS, DOCS = 3, 2
# the architectures whose layers take an input batched otherwise than the rows (neither rows first
# nor rows times heads), so that a narrowed pass fails: the first check finds out (transformers 5.23)
NO_SHARING = {"zaya"}


def together(of: torch.Tensor) -> list[list[int]]:
    """The masks of each branch (``of``: each mask's branch)."""
    return sorted((of == branch).nonzero().flatten().tolist() for branch in of.unique())


def group_gate(model) -> torch.Tensor:
    """Three masks that ablate the same head of layer 0 and differ in the last layer."""
    geometry = HeadGeometry.of(model.config)
    gate = torch.ones(MASKS, geometry.n_layers, geometry.n_heads)
    gate[:, 0, 1] = 0
    gate[1, -1, 0] = 0
    gate[2, -1, 2:] = 0
    return gate


def full_pass(model, docs, gate, cache=False):
    """Every (document, mask) row through every layer, row r gated by mask r % MASKS."""
    rows = docs.repeat_interleave(len(gate), dim=0)
    with torch.no_grad(), ablate_heads(model, gate.repeat(len(docs), 1, 1)):
        out = model(rows, use_cache=cache)
    return (out.logits, getattr(out, "past_key_values", None)) if cache else out.logits


def shared_pass(model, shared, docs, gate, cache=False):
    rows = docs.repeat_interleave(len(gate), dim=0)

    def forward():
        out = model(rows, use_cache=cache)
        return out.logits, getattr(out, "past_key_values", None) if cache else None

    with torch.no_grad():
        logits, kept = shared.run(len(docs), gate, forward)
    return (logits, kept) if cache else logits


def rows_through(model, layer):
    """The rows of each pass that layer ``layer`` computes (its output projection's input)."""
    seen = []
    module = model.get_submodule(checked_projections(model)[layer])
    handle = module.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[0]))
    return seen, handle


def cache_tensors(cache):
    """Each layer's keys and values of a prompt pass's cache (none for a model without one)."""
    if cache is None:
        return []
    pairs = ((getattr(layer, "keys", None), getattr(layer, "values", None)) for layer in cache.layers)
    return [tensor for pair in pairs for tensor in pair if tensor is not None]


@pytest.mark.parametrize("model_type", sorted(SUPPORTED_MODEL_TYPES))
def test_every_row_gets_its_own_full_pass_logits_and_cache(model_type, caplog):
    """A log-likelihood pass, then a prompt pass (generation's): where the check keeps sharing,
    each row's logits, and its keys and values in every layer, are its own full pass's."""
    model = tiny_decoder(model_type)
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(0))
    gate = group_gate(model)
    expected = full_pass(model, docs, gate)
    shared = SharedLayers(model)
    with caplog.at_level(logging.WARNING, logger="headloc"):
        checked = shared_pass(model, shared, docs, gate)
    torch.testing.assert_close(checked, expected)  # the check returns the full pass
    kept = shared.layers is not None
    assert kept == (model_type not in NO_SHARING), caplog.text
    assert kept == ("masks share no layers on this model" not in caplog.text)
    if kept:
        seen, handle = rows_through(model, 0)
        last, last_handle = rows_through(model, -1)
        try:
            again = shared_pass(model, shared, docs, gate)
        finally:
            handle.remove()
            last_handle.remove()
        torch.testing.assert_close(again, expected, rtol=1e-4, atol=1e-5)
        # layer 0 ran once per document, not once per (document, mask); the last layer, where
        # the masks differ, once per (document, mask)
        assert (seen, last) == ([DOCS], [DOCS * MASKS])
        assert shared.layers is not None
    # a prompt pass, checked afresh (the check now compares keys and values too)
    logits, cache = full_pass(model, docs, gate, cache=True)
    shared = SharedLayers(model)
    with caplog.at_level(logging.WARNING, logger="headloc"):
        shared_pass(model, shared, docs, gate, cache=True)
    assert (shared.layers is not None) == (model_type not in NO_SHARING), caplog.text
    if shared.layers is not None:
        got, got_cache = shared_pass(model, shared, docs, gate, cache=True)
        torch.testing.assert_close(got, logits, rtol=1e-4, atol=1e-5)
        for mine, theirs in zip(cache_tensors(got_cache), cache_tensors(cache), strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


def test_masks_branch_where_they_first_differ_and_keep_their_own_cache():
    """Four masks: two alike up to layer 1, where one of them turns; a third that differs in layer
    0; a fourth like the first. Layer 0 runs twice per document (two branches), layer 1 three
    times; each row's logits, keys and values are its own full pass's."""
    config = transformers.CONFIG_MAPPING["llama"](**{**TINY, "num_hidden_layers": 3})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    geometry = HeadGeometry.of(model.config)
    gate = torch.ones(4, geometry.n_layers, geometry.n_heads)
    gate[1, 1, 0] = 0
    gate[2, 0, 1] = 0
    gate[:, 2, 2] = 0
    found = branches(gate)
    assert [together(of) for of in found.of] == [[[0, 1, 3], [2]], [[0, 3], [1], [2]], [[0, 3], [1], [2]]]
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(4))
    logits, cache = full_pass(model, docs, gate, cache=True)
    shared = SharedLayers(model)
    shared.checked = True  # the shared pass itself, not the check's full pass
    seen = [rows_through(model, layer) for layer in range(3)]
    try:
        got, kept = shared_pass(model, shared, docs, gate, cache=True)
    finally:
        for _, handle in seen:
            handle.remove()
    assert [rows for rows, _ in seen] == [[DOCS * 2], [DOCS * 3], [DOCS * 3]]
    torch.testing.assert_close(got, logits, rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(kept.layers, cache.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(mine.values, theirs.values, rtol=1e-4, atol=1e-5)


def test_a_shared_pass_that_runs_but_differs_is_caught_by_the_check(caplog):
    """A model whose layer adds a bias of its own per batch row (taken by position, not narrowed
    with the rows) runs a shared pass without an error but wrongly: the check compares, returns
    the full pass and shares no more."""
    model = tiny_decoder("llama")
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(6))
    gate = group_gate(model)
    bias = torch.randn(DOCS * MASKS, 1, model.config.hidden_size, generator=torch.Generator().manual_seed(7))
    handle = model.model.layers[1].register_forward_pre_hook(
        lambda module, args: (args[0] + bias[:len(args[0])], *args[1:]))
    try:
        expected = full_pass(model, docs, gate)
        shared = SharedLayers(model)
        with caplog.at_level(logging.WARNING, logger="headloc"):
            got = shared_pass(model, shared, docs, gate)
    finally:
        handle.remove()
    torch.testing.assert_close(got, expected)
    assert shared.layers is None and "sharing layers changed its answers" in caplog.text


def test_a_group_that_agrees_on_no_layer_runs_one_full_pass():
    model = tiny_decoder("llama")
    docs = torch.randint(3, VOCAB, (DOCS, 9), generator=torch.Generator().manual_seed(1))
    gate = group_gate(model)
    gate[1, 0, 1] = 1  # every mask differs from the others in layer 0
    gate[2, 0, 2] = 0
    seen, handle = rows_through(model, 0)
    shared = SharedLayers(model)
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
    seen, handle = rows_through(model, 0)
    try:
        got = shared_pass(model, shared, docs, gate)
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
