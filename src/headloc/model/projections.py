"""Where head ablation acts: each decoder layer's attention output projection, found in the model's
modules and checked to read exactly the heads headloc counts.

A gate hooked on the wrong module, or on slices of a projection that are not heads, would ablate
something else and say nothing; so a model whose projections cannot be found one per layer, or
whose layers hold other heads than the config says, is refused here, once, when it is loaded.
"""

from __future__ import annotations

import torch

from headloc.heads import HeadGeometry

# Where each decoder layer's attention output projection sits: a module named one of
# OUTPUT_NAMES, child of a module named one of ATTENTION_NAMES, child of the layer (an entry of the
# model's one stack of decoder layers). Cross-attention (``encoder_attn``, ``crossattention``) is
# never one of them.
ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")
OUTPUT_NAMES = ("o_proj", "out_proj", "dense", "c_proj", "wo")


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
