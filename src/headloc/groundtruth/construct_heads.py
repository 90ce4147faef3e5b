"""A constructed model's planted heads, written by hand layer by layer from the bottom (:func:`plant`).

What each head reads and writes is told in :mod:`headloc.groundtruth.construct`; here are its weights.
The attention logits below have wide margins so that the spread of RMSNorm's scale across positions
never changes which position a head attends to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.construct_layout import CODE, Layout
from headloc.groundtruth.design import UNIVERSAL
from headloc.groundtruth.recipe import Recipe
from headloc.heads import parse_head

# attention logits (after HF's 1/sqrt(head_dim) scaling) of the written heads
POSITION = 100.0  # a role head's score at its source (two rotary pairs, 50 each)
GATE = 200.0  # the gate's weight: +0.5 GATE when slot and query are there, -0.5 GATE or less when not
REST = 100.0  # a role head's score for <s>: between the open gate (200) and the shut one (<= 0)
MARKER = 60.0  # the universal head's score for the task marker (30 for <s>, 0 for anything else)
FREQS = (0, 1)  # the rotary pairs a role head finds its source with (frequencies 1 and 1/10 at theta 1e4)
GATE_DIM, REST_DIM = 2, 3  # the q/k dims of the gate and of the rest on <s> (slow rotary pairs)


def _input_scale(model, contexts: torch.Tensor, norm) -> float:
    """Mean of 1/rms over every position of ``contexts`` at the input of ``norm`` (an RMSNorm): what a
    task dim is multiplied by there (its norm weight is 1)."""
    seen = []
    handle = norm.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach()))
    try:
        with torch.no_grad():
            model(contexts)
    finally:
        handle.remove()
    hidden = seen[0].double()
    return float((1.0 / hidden.pow(2).mean(-1).add(norm.variance_epsilon).sqrt()).mean())


def _rotary_query(offset: int, freq: float) -> tuple[float, float]:
    """The (x_i, x_{i+d/2}) direction of a query pair whose score against a key pair (1, 0) peaks when the
    key is ``offset`` positions back (HF Llama's rotary: score = cos(offset * freq + angle))."""
    angle = -offset * freq
    return math.cos(angle), math.sin(angle)


def _universal(layout: Layout, tasks, unit: float, s: float, const: float, d: int, hidden: int):
    """q, k, v, o slices of the universal head: attend to the task marker (to <s> when there is none)
    from every position, and write the marker into the slot."""
    wq, wk, wv, wo = torch.zeros(d, hidden), torch.zeros(d, hidden), torch.zeros(d, hidden), torch.zeros(hidden, d)
    wq[REST_DIM, layout.const] = math.sqrt(MARKER) * unit / const
    wk[REST_DIM, layout.any_marker] = math.sqrt(MARKER) * unit
    wk[REST_DIM, layout.bos] = 0.5 * math.sqrt(MARKER) * unit
    for i, task in enumerate(tasks):
        wv[i, layout.marker(task)] = 1.0 / s
        wo[layout.slot(task), i] = 1.0
    return wq, wk, wv, wo


@dataclass(frozen=True)
class Written:
    """What a role head reads and writes: its gate (residual dim -> weight; open when the weighted sum
    passes 1.5), the strength at which it copies the word's code into the answer (0: none), and the
    flag dim it sets to 1 where it opens (None: none)."""

    gate: dict
    copy: float = 1.0
    flag: int | None = None


def written_heads(layout: Layout, design, role: str) -> list[Written]:
    """The head(s) of ``role``, first step first: one gated copy; a redundant role's two; an
    interaction's two (docs of :mod:`headloc.groundtruth.construct`)."""
    task, query = _kinds(design)[role]
    copy = Written({layout.slot(task): 1.0, layout.query(query): 1.0})
    if role not in design.interactions:
        return [copy] * design.heads_per_role(role)
    interaction, flag = design.interactions[role], layout.flag(role)
    if interaction.kind == "synergy":
        return [Written(copy.gate, copy=0.0, flag=flag), Written({layout.slot(task): 1.0, flag: 1.0})]
    # backup and redundant: the primary's "done" shuts the second head's gate (1 + 1 - 2 < 1.5)
    return [Written(copy.gate, flag=flag), Written({**copy.gate, flag: -2.0}, copy=interaction.strength)]


def _role(layout: Layout, written: Written, offset: int, inv_freq, unit: float, s: float, const: float,
          d: int, hidden: int):
    """q, k, v, o slices of a role head: from a position where its gate opens, attend ``offset``
    positions back (RoPE), else to <s>; copy the word's code into the answer, set its flag."""
    wq, wk, wv, wo = torch.zeros(d, hidden), torch.zeros(d, hidden), torch.zeros(d, hidden), torch.zeros(hidden, d)
    amplitude = math.sqrt(POSITION / len(FREQS))
    for pair in FREQS:
        cos, sin = _rotary_query(offset, float(inv_freq[pair]))
        wq[pair, layout.const] = amplitude * cos * unit / const
        wq[pair + d // 2, layout.const] = amplitude * sin * unit / const
        wk[pair, layout.content] = amplitude * unit
    gate = math.sqrt(GATE)
    for dim, weight in written.gate.items():
        wq[GATE_DIM, dim] = weight * gate * unit
    wq[GATE_DIM, layout.const] = -1.5 * gate * unit / const
    wk[GATE_DIM, layout.content] = gate * unit
    wq[REST_DIM, layout.const] = math.sqrt(REST) * unit / const
    wk[REST_DIM, layout.bos] = math.sqrt(REST) * unit
    n = layout.code_dims
    if written.copy:
        wv[:n, layout.code.start:layout.code.start + n] = torch.eye(n) / s
        wo[layout.answer.start:layout.answer.start + n, :n] = written.copy * torch.eye(n)
    if written.flag is not None:  # the last value dim, free of code (code_dims): the content of its source
        wv[CODE - 1, layout.content] = 1.0 / s
        wo[written.flag, CODE - 1] = 1.0
    return wq, wk, wv, wo


def _kinds(design) -> dict[str, tuple[str, int]]:
    """Role -> the one (task, query) it serves; a constructed role head cannot serve two."""
    kinds = {}
    for task, ks in design.tasks.items():
        for kind in ks:
            if kind.role in kinds:
                raise ValueError(f"role {kind.role}: a constructed role head serves exactly one (task, query) kind")
            kinds[kind.role] = (task, kind.query)
    return kinds


def plant(recipe: Recipe, model, layout: Layout, contexts: torch.Tensor) -> dict:
    """Write the universal and role heads (bottom layer first) and the unembedding of the answer."""
    design, config = recipe.design, model.config
    d, hidden = config.head_dim, config.hidden_size
    if d < CODE:
        raise ValueError(f"head_dim {d} is below the {CODE} dims a planted head needs")
    by_layer: dict[int, list[tuple[str, int, int]]] = {}
    for role, heads in recipe.placement().items():
        for step, head in enumerate(heads):
            layer, h = parse_head(head)
            by_layer.setdefault(layer, []).append((role, step, h))
    sources = T.source_positions(design)
    first_item = 2 if design.bos else 1  # x1's position: after <s> and the marker
    inv_freq = model.model.rotary_emb.inv_freq.double()
    const = float(model.model.embed_tokens.weight[0, layout.const].detach())
    scales = {}
    for layer in sorted(by_layer):
        attn = model.model.layers[layer].self_attn
        s = _input_scale(model, contexts, model.model.layers[layer].input_layernorm)
        scales[layer] = round(s, 5)
        unit = math.sqrt(math.sqrt(d)) / s  # turns a normalised feature of 1 into d ** 1/4 (q.k / sqrt(d) = 1)
        for role, step, h in by_layer[layer]:
            if role == UNIVERSAL:
                weights = _universal(layout, design.tasks, unit, s, const, d, hidden)
            else:
                offset = contexts.shape[1] - 1 - (first_item + sources[role] - 1)
                written = written_heads(layout, design, role)[step]
                weights = _role(layout, written, offset, inv_freq, unit, s, const, d, hidden)
            rows = slice(h * d, (h + 1) * d)
            with torch.no_grad():
                for proj, w in zip((attn.q_proj, attn.k_proj, attn.v_proj), weights[:3]):
                    proj.weight[rows] = w
                attn.o_proj.weight[:, rows] = weights[3]
    s_final = _input_scale(model, contexts, model.model.norm)
    scales["final"] = round(s_final, 5)
    margin = float(recipe.training["margin"])
    codes = model.model.embed_tokens.weight[:, layout.code].detach()
    with torch.no_grad():
        model.lm_head.weight[:, layout.answer] = margin * codes / s_final
    return {"input_scales": scales, "margin": margin}
