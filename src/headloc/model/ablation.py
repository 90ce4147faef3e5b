"""Head ablation through gates on the attention output projections.

Every supported architecture concatenates its heads' outputs, shape
``[batch, pos, n_heads * head_dim]``, right before one output projection. A forward pre-hook on that
projection reshapes its input to ``[batch, pos, head_index, d_head]`` (TransformerLens's ``hook_z``)
and multiplies it by a gate, so a gate of 0 removes the head's contribution exactly as zeroing the
projection's input columns would. The gate is ``[layers, heads]`` (one mask for every row) or
``[batch, layers, heads]`` (row ``i`` of the batch gets mask ``i``: several masks share one pass).

With grouped-query attention the gate acts on query heads, the paper's unit of ablation.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from headloc.heads import HeadGeometry  # re-exported: callers import it from here too
from headloc.model.projections import checked_projections


def hook_point(layer: int) -> str:
    """TransformerLens-style name of the point a gate acts on."""
    return f"blocks.{layer}.attn.hook_z"


def hook_module_path(model, layer: int) -> str:
    """HF module path of layer ``layer``'s output projection
    (:func:`~headloc.model.projections.checked_projections`)."""
    return checked_projections(model)[layer]


def masks_to_gate(masks, geometry: HeadGeometry) -> torch.Tensor:
    """Masks (1 = ablated), shape (N,) or (B, N), to a gate of 0/1, shape (L, H) or (B, L, H)."""
    masks = np.asarray(masks)
    if masks.shape[-1] != geometry.total:
        raise ValueError(f"a mask has {masks.shape[-1]} entries but the model has {geometry.total} heads")
    gate = 1.0 - torch.as_tensor(masks, dtype=torch.float32)
    return gate.reshape(*masks.shape[:-1], geometry.n_layers, geometry.n_heads)


def _gate_hook(gate: torch.Tensor, n_heads: int):
    """Pre-hook multiplying head outputs by ``gate``: [heads] or [batch, heads]."""

    def hook(module, args, kwargs):
        z = args[0]  # [batch, pos, n_heads * d_head]
        batch, pos, width = z.shape
        g = gate.to(device=z.device, dtype=z.dtype)
        if g.dim() == 2:
            if g.shape[0] != batch:
                raise ValueError(
                    f"the gate holds {g.shape[0]} masks but the batch has {batch} rows: "
                    "batched gates need one mask per batch row"
                )
            g = g[:, None, :, None]  # [batch, 1, head_index, 1]
        else:
            g = g[None, None, :, None]
        z = (z.view(batch, pos, n_heads, width // n_heads) * g).view(batch, pos, width)
        return (z, *args[1:]), kwargs

    return hook


def gate_layer(model, layer: int, gate: torch.Tensor):
    """Gate the heads of layer ``layer`` of ``model`` by ``gate`` ([heads], or [batch, heads]: one
    row per batch row) until the returned handle is removed."""
    path = hook_module_path(model, layer)
    try:
        module = model.get_submodule(path)
    except AttributeError as error:
        raise ValueError(f"cannot resolve hook point {hook_point(layer)} at {path}") from error
    # Move the gate once, here, so the hook's .to() is a no-op on the hot path; not for weights
    # accelerate offloaded (device "meta" until their forward pass): the hook moves the gate to
    # whatever device the layer's input is on.
    weight = module.weight
    if weight.device.type != "meta":
        gate = gate.to(device=weight.device, dtype=weight.dtype)
    return module.register_forward_pre_hook(_gate_hook(gate, HeadGeometry.of(model.config).n_heads), with_kwargs=True)


class HeadAblation(contextlib.AbstractContextManager):
    """Gate attention heads of ``model`` while the context is open.

    Parameters
    ----------
    model : a transformers causal LM whose output projections
        :func:`~headloc.model.projections.output_projections` finds.
    gate : tensor ``[layers, heads]`` or ``[batch, layers, heads]``; 1 keeps a head, 0 removes it.
        Values in between scale a head's output. A float32 gate that requires grad stays in the
        autograd graph (every layer is hooked then, even where the gate is all ones), so
        ``d(loss)/d(gate)`` is available after ``loss.backward()`` (attribution, CHG).

    Examples
    --------
    >>> with HeadAblation(model, gate) as ablation:   # doctest: +SKIP
    ...     logits = model(input_ids).logits
    """

    def __init__(self, model, gate: torch.Tensor):
        self.model = model
        self.gate = torch.as_tensor(gate, dtype=torch.float32)
        self.geometry = HeadGeometry.of(model.config)
        expected = (self.geometry.n_layers, self.geometry.n_heads)
        if tuple(self.gate.shape[-2:]) != expected or self.gate.dim() not in (2, 3):
            raise ValueError(
                f"gate shape {tuple(self.gate.shape)} does not match the model: expected "
                f"[layers, heads] = {list(expected)} or [batch, layers, heads]"
            )
        self.handles: list = []
        self.hooked: list[str] = []

    def __enter__(self):
        try:
            for layer in range(self.geometry.n_layers):
                layer_gate = self.gate[..., layer, :]
                if not layer_gate.requires_grad and bool((layer_gate == 1).all()):
                    continue  # nothing to remove in this layer: skip the hook (not for a gate
                    # being differentiated: d(output)/d(gate) at gate = 1 needs the hook)
                self.handles.append(gate_layer(self.model, layer, layer_gate))
                self.hooked.append(hook_point(layer))
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.hooked.clear()

    def __repr__(self):
        shape = list(self.gate.shape)
        return f"HeadAblation(gate={shape}, hooked={len(self.hooked)} points: {', '.join(self.hooked)})"


def ablate_heads(model, gate) -> HeadAblation:
    """``with ablate_heads(model, gate):`` - see :class:`HeadAblation`."""
    return HeadAblation(model, gate)
