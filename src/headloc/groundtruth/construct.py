"""A planted model whose truth holds by construction: text heads trained, the task circuit written by hand.

``training.scheme: constructed`` (docs/ground-truth.md, "The certified family"). The residual
stream has two parts:

- **text dims** (``size.hidden`` of them): embeddings, every unplanted head, every MLP and the
  unembedding's text part are trained on the general text (:func:`train_text`), with every
  planted head's output held at zero. Their weights never read or write the task dims (their
  gradients there are masked to zero), so nothing trained can lean on the task circuit.
- **task dims** (:class:`Layout`): fixed token features (a constant, "is <s>", "is a content word",
  the task marker, the query token, an 8-dim code per word) and two written parts: the *slot*
  where the universal head puts the task marker, and the *answer* where role heads put a word's code.

The planted heads are then written (:func:`plant`), layer by layer from the bottom:

- the **universal head** attends from every position to the task marker (to ``<s>`` when there is
  none) and writes the marker into the slot;
- a **role head** (role r, named by one (task, query) pair) attends from the query position to
  its source position x_s when the slot holds its task and the current token is its query (a
  gate in the query: slot + query - 1.5, positive only when both are there), and to ``<s>``
  otherwise; its source is found by position through RoPE (two rotary pairs, frequencies 1 and
  0.1, peak at the source's offset), its value is the word's code, written into the answer;
- the unembedding maps the answer to ``margin`` times each word's code, so a role head gives its
  gold choice a logit lead of about ``margin`` over the other choices;
- a redundant role has two identical heads: either alone already leads by ``margin``;
- an interaction (recipe.INTERACTIONS) has two heads in two layers and a *flag* dim between them:
  a backup's (or a redundant pair's) first head, the primary, also writes "done" into the flag, which
  shuts the second head's gate (slot + query - 2 done - 1.5); the second copies at the backup's
  strength (1 for a redundant pair) once the primary is gone. A synergy's first head writes
  "ready" and copies nothing; the second head's gate is slot + ready - 1.5. A flag is the content
  feature of the position the first head attends to, carried in the last value dim, so a design
  with interactions draws its word codes in ``CODE - 1`` dims (:func:`code_dims`).

RMSNorm divides every dim by the position's rms, so each written weight is divided by the mean
normalisation of that layer's input, measured on the task documents with the lower layers already
planted (:func:`_input_scale`); the attention scores have wide margins (tens of logits) so the
spread of the rms across positions does not change which position wins.

The result loads as an ordinary ``LlamaForCausalLM`` (no attention biases) and its truth is still
measured (:mod:`headloc.groundtruth.truth`): the construction says what should hold, truth.json
what does.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.recipe import UNIVERSAL, Recipe
from headloc.groundtruth.training import cosine, make_config, train_on_text
from headloc.heads import parse_head

CODE = 8  # dims of a word's code (one head's value width: head_dim must be at least this)
# attention logits (after HF's 1/sqrt(head_dim) scaling) of the written heads
POSITION = 100.0  # a role head's score at its source (two rotary pairs, 50 each)
GATE = 200.0  # the gate's weight: +0.5 GATE when slot and query are there, -0.5 GATE or less when not
REST = 100.0  # a role head's score for <s>: between the open gate (200) and the shut one (<= 0)
MARKER = 60.0  # the universal head's score for the task marker (30 for <s>, 0 for anything else)
FREQS = (0, 1)  # the rotary pairs a role head finds its source with (frequencies 1 and 1/10 at theta 1e4)
GATE_DIM, REST_DIM = 2, 3  # the q/k dims of the gate and of the rest on <s> (slow rotary pairs)


@dataclass(frozen=True)
class Layout:
    """Where each task feature sits in the residual stream: dims ``text`` onwards."""

    text: int
    tasks: tuple[str, ...]
    queries: tuple[int, ...]
    flags: tuple[str, ...] = ()  # interaction roles: one flag dim each, from the first head to the second
    code_dims: int = CODE  # the code dims a word's code uses (code_dims(design))

    def __post_init__(self):
        if len(self.tasks) > CODE:
            raise ValueError(f"the universal head carries at most {CODE} task markers; the design has {len(self.tasks)}")

    @property
    def const(self) -> int:
        return self.text

    @property
    def bos(self) -> int:
        return self.text + 1

    @property
    def content(self) -> int:
        return self.text + 2

    @property
    def any_marker(self) -> int:
        return self.text + 3

    def marker(self, task: str) -> int:
        return self.text + 4 + self.tasks.index(task)

    def query(self, q: int) -> int:
        return self.text + 4 + len(self.tasks) + self.queries.index(q)

    @property
    def code(self) -> slice:
        start = self.text + 4 + len(self.tasks) + len(self.queries)
        return slice(start, start + CODE)

    def slot(self, task: str) -> int:
        return self.code.stop + self.tasks.index(task)

    @property
    def answer(self) -> slice:
        start = self.code.stop + len(self.tasks)
        return slice(start, start + CODE)

    def flag(self, role: str) -> int:
        return self.answer.stop + self.flags.index(role)

    @property
    def width(self) -> int:
        return self.answer.stop + len(self.flags)


def layout_of(recipe: Recipe) -> Layout:
    design = recipe.design
    return Layout(text=recipe.size.hidden, tasks=tuple(design.tasks), queries=tuple(design.queries),
                  flags=tuple(role for role in design.roles if role in design.interactions),
                  code_dims=code_dims(design))


def code_dims(design) -> int:
    """The dims a word's code uses: ``CODE``, or ``CODE - 1`` where interactions need the last value
    dim of a head for their flag."""
    return CODE - 1 if design.interactions else CODE


def word_codes(design, seed: int, trials: int = 200) -> np.ndarray:
    """[words, CODE] unit codes in the first :func:`code_dims` dims: orthogonal within each part of the
    words (a document's gold and its gap distractors come from one part), and of low coherence
    across parts (the best of ``trials`` seeded draws), so that a role head's gold leads every other
    choice."""
    parts = T.pools(design)
    index = {w: i for i, w in enumerate(T.words(design))}
    rng = np.random.default_rng([design.seed, seed, 17])
    dims = code_dims(design)
    best, best_coherence = None, np.inf
    for _ in range(trials):
        codes = np.zeros((design.words, CODE))
        for part in parts:
            if len(part) > dims:
                raise ValueError(f"a part of {len(part)} words cannot have orthogonal {dims}-dim codes")
            q, _ = np.linalg.qr(rng.normal(size=(dims, len(part))))
            codes[[index[w] for w in part], :dims] = q.T
        coherence = np.abs(codes @ codes.T - np.eye(design.words)).max()
        if coherence < best_coherence:
            best, best_coherence = codes, coherence
    return best


def token_features(recipe: Recipe, layout: Layout, const: float) -> torch.Tensor:
    """[vocab, task width] the task dims of each token's embedding (fixed, never trained)."""
    design = recipe.design
    ids = T.token_ids(design)
    features = torch.zeros(len(ids), layout.width - layout.text)
    at = lambda dim: dim - layout.text  # noqa: E731
    features[:, at(layout.const)] = const
    features[ids["<s>"], at(layout.bos)] = 1.0
    codes = torch.tensor(word_codes(design, recipe.size.seed), dtype=torch.float32)
    for i, word in enumerate(T.words(design)):
        features[ids[word], at(layout.content)] = 1.0
        features[ids[word], at(layout.code.start):at(layout.code.stop)] = codes[i]
    for task in design.tasks:
        features[ids[task], at(layout.any_marker)] = 1.0
        features[ids[task], at(layout.marker(task))] = 1.0
    for q in design.queries:
        features[ids[T.query_token(q)], at(layout.query(q))] = 1.0
    return features


def text_masks(model, layout: Layout, planted) -> dict[str, torch.Tensor]:
    """Parameter name -> 0/1 mask: 1 where the text training may put weight. Nothing trained reads or
    writes a task dim; the planted heads' q/k/v rows and o_proj columns stay zero."""
    text = torch.zeros(model.config.hidden_size)
    text[:layout.text] = 1.0
    d = model.config.head_dim
    masks = {}
    for name, param in model.named_parameters():
        if name.endswith("embed_tokens.weight") or name.endswith("norm.weight"):
            masks[name] = text.expand_as(param).clone()
        elif name == "lm_head.weight" or any(p in name for p in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")):
            masks[name] = text[None, :].expand_as(param).clone()  # reads text dims only
        elif "o_proj" in name or "down_proj" in name:
            masks[name] = text[:, None].expand_as(param).clone()  # writes text dims only
    for layer, head in planted:
        attn = f"model.layers.{layer}.self_attn"
        for proj in ("q_proj", "k_proj", "v_proj"):
            masks[f"{attn}.{proj}.weight"][head * d:(head + 1) * d] = 0.0
        masks[f"{attn}.o_proj.weight"][:, head * d:(head + 1) * d] = 0.0
    return masks


def train_text(recipe: Recipe, model, masks, *, log=print) -> dict:
    """Train the text dims on the general text; every masked weight stays exactly as it was."""
    size, design = recipe.size, recipe.design
    params = dict(model.named_parameters())
    handles = []
    with torch.no_grad():
        for name, mask in masks.items():
            if not name.endswith(("embed_tokens.weight", "norm.weight")):  # those keep their task part as set
                params[name].mul_(mask)
            handles.append(params[name].register_hook(lambda grad, mask=mask: grad * mask))
    optimizer = torch.optim.AdamW(model.parameters(), lr=size.lr, weight_decay=0.0, betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine(int(recipe.training.get("warmup", 50)), size.steps))
    rng = np.random.default_rng([design.seed, size.seed, 11])
    tables = T.markov_tables(design)
    history, start = [], time.perf_counter()
    model.train()

    def on_step(step, loss):
        if step % 50 == 0 or step == size.steps - 1:
            history.append({"step": step, "text_loss": round(float(loss.detach()), 4),
                            "seconds": round(time.perf_counter() - start, 1)})
            log(str(history[-1]))
            if not history[-1]["text_loss"] <= 1.5 * history[0]["text_loss"]:  # NaN too
                raise RuntimeError(f"{recipe.name}: the text training diverged at step {step} (loss "
                                   f"{history[-1]['text_loss']}, {history[0]['text_loss']} at step 0): lower its lr")

    train_on_text(model, list(model.parameters()), optimizer, scheduler, design, tables, size.text_batch, rng,
                  size.steps, on_step)
    for handle in handles:
        handle.remove()
    model.eval()
    return {"text_steps": size.steps, "history": history}


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


def build_constructed(recipe: Recipe, *, threads: int = 1, log=print):
    """The constructed model (eval mode) and its record: text training, then the planted heads."""
    from transformers import LlamaForCausalLM

    missing = {"margin", "const"} - set(recipe.training)
    if missing:
        raise ValueError(f"{recipe.name}: scheme constructed needs training keys {sorted(missing)} "
                         "(config/ground_truth.yaml, trainings.constructed)")
    if not recipe.design.bos:
        raise ValueError("scheme constructed needs design.bos: true (heads rest on <s> when they have nothing to do)")
    torch.set_num_threads(threads)
    torch.manual_seed(recipe.size.seed)
    layout = layout_of(recipe)
    heads = recipe.size.heads  # transformers wants the residual a multiple of the heads: unused dims pad it
    model = LlamaForCausalLM(make_config(recipe, hidden=-(-layout.width // heads) * heads, bias=False))
    start = time.perf_counter()
    const = float(recipe.training["const"])
    with torch.no_grad():
        model.model.embed_tokens.weight[:, layout.text:layout.width] = token_features(recipe, layout, const)
        # The constant dominates every position's rms (about const / sqrt(width)), so RMSNorm divides
        # every position alike and the written attention scores keep their order across positions;
        # the text dims' norm weights start at that rms, so the text model sees inputs of its own scale.
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param[:layout.text] = const / math.sqrt(model.config.hidden_size)
    masks = text_masks(model, layout, recipe.planted())
    record = train_text(recipe, model, masks, log=log)
    docs = [d for task in recipe.design.tasks for d in T.task_documents(recipe.design, task)]
    contexts = torch.from_numpy(T.encode_documents(recipe.design, docs)[0])
    record.update(plant(recipe, model, layout, contexts))
    tables = T.markov_tables(recipe.design)
    record.update({"seconds": round(time.perf_counter() - start, 1), "threads": threads, "scheme": "constructed",
                   "text_entropy": round(T.text_entropy(recipe.design, tables, T.sample_text(
                       recipe.design, tables, 256, np.random.default_rng([recipe.design.seed, 5]))), 4)})
    return model, record
