"""Each layer of a mask group's pass run once per distinct input. A row's input to layer ``l``
depends only on its document and its gates in the layers below ``l``, so copies of a document
(one per mask) whose masks agree there compute the same hidden states. In a shared pass each
layer runs once per document and *branch*: the masks that agree on every layer up to this one.
Masks that ablate one head each, in layers 20-28, run layers 0-19 once per document and each later
layer once per mask whose head lies at or below it; a mask's branch splits off at the first layer
where its gates differ from the others'.

Greedy's rounds, screened greedy's steps and the single-head measurements score masks that share
all but a head or two; :func:`shared_order` puts masks that agree longest side by side, so that a
group of them branches late.

How: the model runs on every (document, mask) row as in the full pass; a forward pre-hook on each
layer narrows its hidden states to the layer's branch rows (from the branches below) and every
other input batched like the rows (position embeddings, attention mask, position ids) to one row
of each branch; a gate hook on its output projection gates each branch by its masks' gates; a hook
on the last layer hands every row its branch's output, so the model's code around its layers sees
every row. A prompt pass's cache then gives each row its branch's keys and values in every layer.
This relies on a model's layers taking their hidden states first and their other inputs batched
like the rows; :class:`SharedLayers` checks the first shared pass of each model against the full
pass and, where they differ or the shared pass fails, warns and never shares again.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import NamedTuple

import numpy as np
import torch

from headloc.engine.backoff import is_out_of_memory
from headloc.model.ablation import ablate_heads, gate_layer
from headloc.model.projections import checked_projections

# how far a shared pass may stray from the full pass on the check (a share of the logits' spread):
# another batch layout rounds differently (about 1e-6 of it in float32, 1e-2 in bfloat16); a
# model whose layers do not take their inputs as assumed changes them by about their spread
AGREEMENT = 0.05

_log = logging.getLogger("headloc")  # a job's log (headloc.io.log_to_file)


def shared_order(masks: np.ndarray) -> np.ndarray:
    """An order of ``masks`` (rows of 0/1, layer by layer) in which neighbours agree on the most
    leading layers: sorted as words, last head first, so that masks ablating late heads come first.

    >>> shared_order(np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]])).tolist()
    [1, 2, 0]
    """
    return np.lexsort(np.asarray(masks).T[::-1])


class Branches(NamedTuple):
    """How the masks of a gate ([masks, layers, heads]) branch, per layer: ``masks[l]`` one mask
    of each branch, ``parents[l]`` each branch's row below layer ``l``: its branch in layer
    ``l - 1``, and in layer 0 its mask (the pass's input holds a row per mask), ``of[l]`` each
    mask's branch."""

    masks: list[torch.Tensor]
    parents: list[torch.Tensor]
    of: list[torch.Tensor]

    @property
    def rows(self) -> int:
        """Rows through all layers per document (the full pass: masks x layers)."""
        return sum(len(kept) for kept in self.masks)


def branches(gate: torch.Tensor) -> Branches:
    """The branches of the masks of ``gate`` in each layer.

    >>> gate = torch.ones(3, 3, 2)
    >>> gate[1, 1, 0] = gate[2, 2, 1] = 0  # mask 1 differs from layer 1 on, mask 2 in layer 2
    >>> found = branches(gate)
    >>> [len(kept) for kept in found.masks], found.of[2].tolist(), found.parents[2].tolist()
    ([1, 2, 3], [2, 0, 1], [0, 1, 1])
    >>> found.parents[0].tolist()  # layer 0's one branch takes mask 0's rows
    [0]
    """
    flat = gate.detach().cpu().float()
    found, before = Branches([], [], []), torch.arange(len(flat))  # below layer 0: a row per mask
    for layer in range(flat.shape[1]):
        _, of = torch.unique(flat[:, :layer + 1].flatten(1), dim=0, return_inverse=True)
        first = torch.full((int(of.max()) + 1,), len(flat)).scatter_reduce(0, of, torch.arange(len(flat)), "amin")
        found.masks.append(first)
        found.parents.append(before[first])
        found.of.append(of)
        before = of
    return found


def _per_branch(value, kept: torch.Tensor, n_rows: int):
    """``value`` (a layer's input other than its hidden states) with the rows ``kept`` (one per
    branch row) where it holds one per row; anything else (broadcast tensors, flags, the cache) as
    it is."""
    if isinstance(value, tuple):
        return tuple(_per_branch(item, kept, n_rows) for item in value)
    if torch.is_tensor(value) and value.dim() >= 2 and n_rows > 1 and value.shape[0] % n_rows == 0:
        # rows first, or rows times heads (Bloom's ALiBi biases, [rows * heads, 1, positions])
        per_row = value.reshape(n_rows, -1, *value.shape[1:])
        return per_row.index_select(0, kept.to(value.device)).flatten(0, 1)
    return value


def _widen(hidden_rows: torch.Tensor, kept: torch.Tensor, n_rows: int, module, args, kwargs):
    """Pre-hook: a layer's hidden states from the rows of the layer below (``hidden_rows`` of them,
    one per branch row here), its other inputs from the pass's rows (``kept``)."""
    def take(hidden):
        return hidden.index_select(0, hidden_rows.to(hidden.device))

    if args:
        args = (take(args[0]), *(_per_branch(item, kept, n_rows) for item in args[1:]))
    else:
        kwargs["hidden_states"] = take(kwargs["hidden_states"])
    return args, {name: _per_branch(value, kept, n_rows) for name, value in kwargs.items()}


def _to_rows(rows: torch.Tensor, module, args, output):
    """Hook on the last layer: its output (first of a tuple) back to one row per (document, mask)."""
    if isinstance(output, (tuple, list)):  # older models' layers return (hidden states, ...)
        return type(output)([output[0].index_select(0, rows.to(output[0].device)), *output[1:]])
    return output.index_select(0, rows.to(output.device))


def _branch_rows(n_docs: int, width: int, index: torch.Tensor) -> torch.Tensor:
    """Rows of a pass laid out document by document, ``width`` per document, taking ``index``
    (one of each document's ``width``) of each document.

    >>> _branch_rows(2, 3, torch.tensor([2, 0])).tolist()
    [2, 0, 5, 3]
    """
    return (torch.arange(n_docs)[:, None] * width + index[None, :]).flatten()


class SharedLayers:
    """Runs a mask group's passes with each layer once per document and branch (module
    docstring), for one model."""

    def __init__(self, model):
        self.model = model
        self.layers = self._layers(model)
        self.checked = False

    @staticmethod
    def _layers(model):
        """The model's list of layers; None for a model spread over devices (accelerate's hooks move
        hidden states between layers there) or whose layers are not a list."""
        if getattr(model, "hf_device_map", None):
            return None
        layers = model.get_submodule(checked_projections(model)[0].split(".0.")[0])
        return layers if isinstance(layers, torch.nn.ModuleList) else None

    def run(self, n_docs: int, gate: torch.Tensor, forward):
        """The answers of ``n_docs`` documents, each repeated once per mask of ``gate`` ([masks,
        layers, heads]): ``forward()`` is the model's pass on those rows (adjacent copies of each
        document, row ``r`` gated by mask ``r % masks``), returning its logits and its cache (None
        without one), one row each per (document, mask). Without sharing (a model whose check
        failed, masks that differ in every layer) it is that pass with each row's gate."""
        masks = len(gate)

        def full():
            with ablate_heads(self.model, gate.repeat(n_docs, 1, 1)):
                return forward()

        plan = branches(gate) if self.layers is not None and masks > 1 else None
        if plan is None or plan.rows == masks * len(plan.masks):  # nothing agreed: nothing to share
            return full()
        if self.checked:
            return self._shared(n_docs, gate, plan, forward)
        try:
            shared = self._shared(n_docs, gate, plan, forward)
        except Exception as error:  # noqa: BLE001 - any failure of the first shared pass: never share
            if is_out_of_memory(error):
                raise  # the caller's back-off retries with fewer rows, and the check with them
            self.checked = True
            return self._give_up(f"its shared pass failed ({type(error).__name__}: {error})", full())
        expected = full()
        self.checked = True
        return self._compare(shared, expected)

    def _shared(self, n_docs, gate, plan: Branches, forward):
        with self._branching(n_docs, gate, plan):
            logits, cache = forward()
        for layer, kept in enumerate(getattr(cache, "layers", None) or []):  # each row its branch's keys and values
            rows = _branch_rows(n_docs, len(plan.masks[layer]), plan.of[layer]).to(kept.keys.device)
            kept.keys, kept.values = kept.keys.index_select(0, rows), kept.values.index_select(0, rows)
        return logits, cache

    @contextlib.contextmanager
    def _branching(self, n_docs, gate, plan: Branches):
        """Each layer narrowed to its branches, each branch gated by its masks' gates, and the last
        layer's output back to one row per (document, mask): the model's code around its layers
        sees every row."""
        masks, n_rows, handles = len(gate), n_docs * len(gate), []
        device = self.model.device  # the indices moved once, not on every hook call (a GPU's copies wait)
        try:
            for layer, module in enumerate(self.layers):
                width = len(plan.masks[layer - 1]) if layer else masks  # rows per document below the layer
                below = _branch_rows(n_docs, width, plan.parents[layer]).to(device)
                kept = _branch_rows(n_docs, masks, plan.masks[layer]).to(device)
                widen = functools.partial(_widen, below, kept, n_rows)
                handles.append(module.register_forward_pre_hook(widen, with_kwargs=True))
                layer_gate = gate[plan.masks[layer], layer].repeat(n_docs, 1)
                if not bool((layer_gate == 1).all()):
                    handles.append(gate_layer(self.model, layer, layer_gate))
            last = len(self.layers) - 1
            back = _branch_rows(n_docs, len(plan.masks[last]), plan.of[last]).to(device)
            handles.append(self.layers[last].register_forward_hook(functools.partial(_to_rows, back)))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _compare(self, shared, full):
        """The first shared pass against the full pass: the full pass's answers, and no more
        sharing where the logits, or any layer's keys and values, differ by more than AGREEMENT of
        their spread."""
        pairs = [(shared[0], full[0])]
        if full[1] is not None:
            pairs += [(mine.keys, theirs.keys) for mine, theirs in zip(shared[1].layers, full[1].layers)]
            pairs += [(mine.values, theirs.values) for mine, theirs in zip(shared[1].layers, full[1].layers)]
        for mine, theirs in pairs:
            if mine.shape != theirs.shape:
                return self._give_up(f"sharing layers changed an answer's shape ({list(mine.shape)})", full)
            gap, spread = float((mine.float() - theirs.float()).abs().max()), float(theirs.float().std())
            if gap > AGREEMENT * spread:
                return self._give_up(f"sharing layers changed its answers by {gap:.3g} (their spread {spread:.3g})", full)
        return full

    def _give_up(self, why: str, full):
        self.layers = None
        _log.warning("masks share no layers on this model: %s; every mask's pass runs all layers", why)
        return full
