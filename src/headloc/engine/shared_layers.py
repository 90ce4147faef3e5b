"""The layers a mask group agrees on, run once per document: below the first layer where the
group's gates differ, every mask's copy of a document computes the same hidden states, so a
log-likelihood pass runs those layers on the documents alone and only the layers from there on
on every (document, mask) row.

Greedy's rounds, screened greedy's steps and the single-head measurements score masks that share
all but a head or two; :func:`shared_order` puts masks that agree longest side by side, so that a
group of them shares most of the model (a group of heads of layers 20-28 skips 20 layers' work on
all copies but one).

How: pass 1 runs the model on the documents (the group's common gate) and stops at the first
differing layer, keeping its input; pass 2 runs the rows (each mask's gate) with the layers below
it standing aside (their output is their input) and that input, repeated once per mask, put in at
it. Standing aside relies on the model passing hidden states from layer to layer and on nothing
else between them; :class:`SharedLayers` checks the first shared pass of each model against the
full pass and, where they differ or the shared pass fails, warns and never shares again.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np
import torch

from headloc.engine.backoff import is_out_of_memory
from headloc.model.projections import checked_projections

# how far a shared pass may stray from the full pass on the check (a share of the logits' spread):
# another batch layout rounds differently (about 1e-6 of it in float32, 1e-2 in bfloat16); a
# model whose layers do not stand aside as assumed changes them by about their spread
AGREEMENT = 0.05

_log = logging.getLogger("headloc")  # a job's log (headloc.io.log_to_file)


def first_difference(gate: torch.Tensor) -> int:
    """The first layer where the masks of ``gate`` ([masks, layers, heads]) differ; the number of
    layers where they all agree.

    >>> gate = torch.ones(2, 4, 3)
    >>> gate[1, 2, 0] = 0
    >>> first_difference(gate), first_difference(gate[:1])
    (2, 4)
    """
    differs = (gate != gate[:1]).flatten(2).any(dim=2).any(dim=0)
    return int(differs.nonzero()[0]) if bool(differs.any()) else gate.shape[1]


def shared_order(masks: np.ndarray) -> np.ndarray:
    """An order of ``masks`` (rows of 0/1, layer by layer) in which neighbours agree on the most
    leading layers: sorted as words, last head first, so that masks ablating late heads come first.

    >>> shared_order(np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]])).tolist()
    [1, 2, 0]
    """
    return np.lexsort(np.asarray(masks).T[::-1])


class _Stop(Exception):
    """Pass 1 has the input of the first differing layer (raised out of the model's forward)."""

    def __init__(self, hidden):
        super().__init__()
        self.hidden = hidden


class _PassOn(torch.nn.Module):
    """A skipped layer: its output is its input. Every layer of the 89 architectures headloc ablates
    takes its hidden states first, by position; a model whose layers take them otherwise, or return
    more than them, fails the first check."""

    def forward(self, hidden, *args, **kwargs):
        return hidden


class SharedLayers:
    """Runs a mask group's log-likelihood passes with its agreed layers shared (module docstring),
    for one model."""

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

    def logits(self, docs: torch.Tensor, masks: int, start: int, forward, common_ablation, row_ablation):
        """The logits of ``docs`` repeated ``masks`` times (adjacent copies, as the full pass lays
        them out), its first ``start`` layers run once per document. ``forward(rows)`` is the
        model's pass that returns the logits wanted; ``common_ablation()`` the context that gates
        the shared layers (the group's common gate), ``row_ablation(rows)`` the one that gates each
        row. Without sharing (a model whose check failed, nothing agreed) it is one full pass."""
        rows = docs.repeat_interleave(masks, dim=0)

        def full():
            with row_ablation(rows):
                return forward(rows)

        if self.layers is None or start <= 0 or masks == 1:  # a lone mask would only add a pass
            return full()
        start = min(start, len(self.layers) - 1)  # the last layer runs per row in any case
        if self.checked:
            return self._shared(docs, rows, masks, start, forward, common_ablation, row_ablation)
        try:
            shared = self._shared(docs, rows, masks, start, forward, common_ablation, row_ablation)
        except Exception as error:  # noqa: BLE001 - any failure of the first shared pass: never share
            if is_out_of_memory(error):
                raise  # the caller's back-off retries with fewer rows, and the check with them
            self.checked = True
            return self._give_up(f"its shared pass failed ({type(error).__name__}: {error})", full())
        expected = full()
        self.checked = True
        return self._compare(shared, expected)

    def _shared(self, docs, rows, masks, start, forward, common_ablation, row_ablation):
        hidden = self._prefix(docs, start, common_ablation)
        with row_ablation(rows), self._skip_below(start, hidden.repeat_interleave(masks, dim=0)):
            return forward(rows)

    def _prefix(self, docs, start, common_ablation):
        """The input of layer ``start`` for each document (pass 1)."""
        def stop(module, args):
            raise _Stop(args[0])

        handle = self.layers[start].register_forward_pre_hook(stop)
        try:
            with common_ablation():
                self.model(docs, use_cache=False)
        except _Stop as stopped:
            return stopped.hidden
        finally:
            handle.remove()
        raise RuntimeError(f"the model's forward pass never reached layer {start}")

    @contextlib.contextmanager
    def _skip_below(self, start, hidden):
        """Layers below ``start`` pass their input on untouched, and layer ``start`` takes ``hidden``
        as its input instead. The skipped layers stay in the list (stand-ins), so that a model that
        looks a layer's settings up by its index (Qwen2's and Gemma 3's attention kinds) still
        finds each layer's own."""
        layers = self.layers

        def put_in(module, args):
            return (hidden.to(args[0].dtype), *args[1:])

        kept = list(layers)
        handle = layers[start].register_forward_pre_hook(put_in)
        for index in range(start):
            layers[index] = _PassOn()
        try:
            yield
        finally:
            for index in range(start):
                layers[index] = kept[index]
            handle.remove()

    def _compare(self, shared, full):
        """The first shared pass against the full pass: the full pass's logits, and no more sharing
        where they differ by more than AGREEMENT of their spread."""
        gap = float((shared.float() - full.float()).abs().max())
        spread = float(full.float().std())
        if gap > AGREEMENT * spread:
            return self._give_up(f"sharing layers changed its logits by {gap:.3g} (their spread {spread:.3g})", full)
        return full

    def _give_up(self, why: str, full):
        self.layers = None
        _log.warning("masks share no layers on this model: %s; every mask's pass runs all layers", why)
        return full
