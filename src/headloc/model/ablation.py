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
    named one of :data:`ATTENTION_NAMES` (or two such, nested) directly inside entry ``i`` of a stack
    of layers, every layer its own module, whose input holds exactly the heads headloc counts
    (:func:`geometry_problem`). Anything else (an encoder-decoder's two stacks, a hybrid whose layers
    are not all attention, a shared layer, a layer with more or wider heads than the config's
    ``num_attention_heads``) is refused: a hook on the wrong module, or on slices that are not heads,
    would ablate something else and say nothing. So is a model type whose heads are not its
    projection's slices (:data:`headloc.model.architectures.REFUSED`). The architectures checked
    against an independent computation are listed in
    :data:`headloc.model.architectures.SUPPORTED_MODEL_TYPES`.
    """
    from headloc.model.architectures import REFUSED

    geometry = HeadGeometry.of(model.config)
    model_type = getattr(model.config, "model_type", None)
    paths, problem = _projection_paths(model, geometry.n_layers)
    if problem is None:
        problem = geometry_problem(model, paths, geometry.n_heads) or REFUSED.get(model_type)
    if problem:
        raise ValueError(f"cannot locate the attention output projections of model_type {model_type!r} "
                         f"({type(model).__name__}): {problem}; headloc ablates the heads of decoder-only models "
                         "whose layers each have one self-attention with an output projection named "
                         f"{'/'.join(OUTPUT_NAMES)}, reading the same number of heads in every layer")
    return paths


def _projection_paths(model, n_layers: int) -> tuple[list[str], str | None]:
    """The one output projection of each layer 0..n_layers-1 (see :func:`output_projections`), and why
    they cannot be trusted (None when they can)."""
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
    paths = [found.get(layer, []) for layer in range(n_layers)]
    if sorted(found) != list(range(n_layers)) or any(len(p) != 1 for p in paths):
        return [], (f"expected one per layer 0..{n_layers - 1}, found "
                    f"{', '.join(f'layer {i}: {p}' for i, p in sorted(found.items())) or 'none'}")
    paths = [p[0] for p in paths]
    if len({path.split(f".{layer}.")[0] for layer, path in enumerate(paths)}) != 1:
        return paths, f"the projections sit in more than one stack of layers: {paths}"
    if len({id(model.get_submodule(path)) for path in paths}) != len(paths):
        return paths, "layers share one projection module"
    return paths, None


# Where an attention module keeps its own geometry (transformers' spellings): the width of one head's
# output, the value head's first (multi-head latent attention: its query/key heads are wider), and
# the number of query heads.
HEAD_WIDTH_NAMES = ("v_head_dim", "head_dim", "head_size")
HEAD_COUNT_NAMES = ("num_heads", "num_attention_heads", "n_head", "n_heads")


def _declared(module, names: tuple[str, ...]) -> int | None:
    return next((value for value in (getattr(module, name, None) for name in names)
                 if isinstance(value, int) and not isinstance(value, bool)), None)


def geometry_problem(model, paths: list[str], n_heads: int) -> str | None:
    """Why a layer's heads are not the ``n_heads`` slices headloc gates (None when every layer's are):
    the attention module (the projection's parent) declares its head count and head width, and the
    count times the width must be the projection's input width, layer by layer. A count or width
    read from the config alone would miss a layer built from other keys (Inkling2's sliding layers:
    48 heads of width 128 where the config's num_attention_heads says 4) and gate 12 heads as one."""
    for layer, path in enumerate(paths):
        attention = model.get_submodule(path.rsplit(".", 1)[0])
        width = _input_width(model.get_submodule(path))
        heads, head_width = _declared(attention, HEAD_COUNT_NAMES), _declared(attention, HEAD_WIDTH_NAMES)
        if heads is None and head_width is None:
            return (f"layer {layer}'s attention ({type(attention).__name__}) declares neither its number of heads "
                    f"({'/'.join(HEAD_COUNT_NAMES)}) nor their width ({'/'.join(HEAD_WIDTH_NAMES)})")
        heads = heads if heads is not None else width // head_width
        head_width = head_width if head_width is not None else width // heads
        if heads != n_heads or heads * head_width != width:
            return (f"layer {layer} ({path}) has {heads} heads of width {head_width} ({type(attention).__name__}: "
                    f"{heads * head_width} values) where its output projection reads {width} values and headloc "
                    f"counts {n_heads} heads per layer (the config's num_attention_heads)")
    return None


def _input_width(module) -> int | None:
    """The input width of a linear map (``nn.Linear``: in_features; GPT-2's Conv1D: nx), else None."""
    if isinstance(module, torch.nn.Linear):
        return module.in_features
    if type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
        return int(module.weight.shape[0])  # Conv1D stores its weight as (in, out)
    return None


def checked_projections(model) -> list[str]:
    """:func:`output_projections`, found once per model (loading calls it, so that a model headloc
    cannot ablate exactly is refused before any evaluation); raises ValueError as it does."""
    paths = getattr(model, "_headloc_projections", None)
    if paths is None:
        paths = output_projections(model)
        model._headloc_projections = paths  # a plain attribute: nn.Module keeps it out of state_dict
    return paths


def hook_module_path(model, layer: int) -> str:
    """HF module path of layer ``layer``'s output projection (:func:`checked_projections`)."""
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
