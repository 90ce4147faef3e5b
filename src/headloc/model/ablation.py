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

# Where each decoder layer's attention output projection sits: a module named one of
# OUTPUT_NAMES, child of a module named one of ATTENTION_NAMES, child of the layer (an entry of the
# model's one stack of decoder layers). Cross-attention (``encoder_attn``, ``crossattention``) is
# never one of them.
ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")
OUTPUT_NAMES = ("o_proj", "out_proj", "dense", "c_proj", "wo")


def hook_point(layer: int) -> str:
    """TransformerLens-style name of the point a gate acts on."""
    return f"blocks.{layer}.attn.hook_z"


def output_projections(model) -> list[str]:
    """The module path of each layer's attention output projection, found in the model's modules.

    One projection per layer is required: exactly one module per layer index that is a linear map
    (``nn.Linear``, or GPT-2's ``Conv1D``) named one of :data:`OUTPUT_NAMES` directly inside a module
    named one of :data:`ATTENTION_NAMES` (or two such, nested) directly inside entry ``i`` of a stack of layers, every layer
    its own module, its input as wide as a whole number of values per head. Anything else (an
    encoder-decoder's two stacks, a hybrid whose layers are not all attention, a shared layer) is
    refused: a hook on the wrong module would ablate nothing and say nothing. The architectures
    checked against an independent computation are listed in
    :data:`headloc.model.architectures.SUPPORTED_MODEL_TYPES`.
    """
    geometry = HeadGeometry.of(model.config)
    found: dict[int, list[str]] = {}
    for path, module in model.named_modules():
        parts = path.split(".")
        inner = len(parts) - 2  # the attention module, maybe wrapped (GPT-Neo: attn.attention)
        while inner > 0 and parts[inner] in ATTENTION_NAMES and parts[inner - 1] in ATTENTION_NAMES:
            inner -= 1
        if len(parts) < 4 or parts[-1] not in OUTPUT_NAMES or parts[-2] not in ATTENTION_NAMES \
                or not parts[inner - 1].isdigit() or _input_width(module) is None:
            continue
        found.setdefault(int(parts[inner - 1]), []).append(path)
    paths = [found.get(layer, []) for layer in range(geometry.n_layers)]
    problem = None
    if sorted(found) != list(range(geometry.n_layers)) or any(len(p) != 1 for p in paths):
        problem = (f"expected one per layer 0..{geometry.n_layers - 1}, found "
                   f"{', '.join(f'layer {i}: {p}' for i, p in sorted(found.items())) or 'none'}")
    elif len({path[0].split(f".{layer}.")[0] for layer, path in enumerate(paths)}) != 1:
        problem = f"the projections sit in more than one stack of layers: {[p[0] for p in paths]}"
    else:
        modules = [model.get_submodule(p[0]) for p in paths]
        if len({id(m) for m in modules}) != len(modules):
            problem = "layers share one projection module"
        elif any(_input_width(m) % geometry.n_heads for m in modules):
            problem = f"a projection's input width is not a multiple of the {geometry.n_heads} heads"
    if problem:
        raise ValueError(f"cannot locate the attention output projections of model_type "
                         f"{model.config.model_type!r} ({type(model).__name__}): {problem}; headloc ablates "
                         "the heads of decoder-only models whose layers each have one self-attention with "
                         f"an output projection named {'/'.join(OUTPUT_NAMES)}")
    return [p[0] for p in paths]


def _input_width(module) -> int | None:
    """The input width of a linear map (``nn.Linear``: in_features; GPT-2's Conv1D: nx), else None."""
    if isinstance(module, torch.nn.Linear):
        return module.in_features
    if type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
        return int(module.weight.shape[0])  # Conv1D stores its weight as (in, out)
    return None


def hook_module_path(model, layer: int) -> str:
    """HF module path of layer ``layer``'s output projection (:func:`output_projections`, found
    once per model); raises ValueError for a model where it cannot be located safely."""
    paths = getattr(model, "_headloc_projections", None)
    if paths is None:
        paths = output_projections(model)
        model._headloc_projections = paths  # a plain attribute: nn.Module keeps it out of state_dict
    return paths[layer]


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


class HeadAblation(contextlib.AbstractContextManager):
    """Gate attention heads of ``model`` while the context is open.

    Parameters
    ----------
    model : a transformers causal LM whose output projections :func:`output_projections` finds.
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
                path = hook_module_path(self.model, layer)
                try:
                    module = self.model.get_submodule(path)
                except AttributeError as error:
                    raise ValueError(f"cannot resolve hook point {hook_point(layer)} at {path}") from error
                # Move the gate once, here, so the hook's .to() is a no-op on the hot path; not
                # for weights accelerate offloaded (device "meta" until their forward pass):
                # the hook moves the gate to whatever device the layer's input is on.
                weight = module.weight
                if weight.device.type != "meta":
                    layer_gate = layer_gate.to(device=weight.device, dtype=weight.dtype)
                hook = _gate_hook(layer_gate, self.geometry.n_heads)
                self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
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
