"""A planted model whose truth holds by construction: text heads trained, the task circuit written by hand.

``training.scheme: constructed`` (docs/ground-truth.md, "The certified family"). The residual
stream has two parts:

- **text dims** (``size.hidden`` of them): embeddings, every unplanted head, every MLP and the
  unembedding's text part are trained on the general text (:func:`train_text`), with every
  planted head's output held at zero. Their weights never read or write the task dims (their
  gradients there are masked to zero), so nothing trained can lean on the task circuit.
- **task dims** (:class:`headloc.groundtruth.construct_layout.Layout`): fixed token features (a
  constant, "is <s>", "is a content word", the task marker, the query token, an 8-dim code per word)
  and two written parts: the *slot* where the universal head puts the task marker, and the *answer*
  where role heads put a word's code.

The planted heads are then written (:func:`headloc.groundtruth.construct_heads.plant`), layer by
layer from the bottom:

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
- an interaction (design.INTERACTIONS) has two heads in two layers and a *flag* dim between them:
  a backup's (or a redundant pair's) first head, the primary, also writes "done" into the flag, which
  shuts the second head's gate (slot + query - 2 done - 1.5); the second copies at the backup's
  strength (1 for a redundant pair) once the primary is gone. A synergy's first head writes
  "ready" and copies nothing; the second head's gate is slot + ready - 1.5. A flag is the content
  feature of the position the first head attends to, carried in the last value dim, so a design
  with interactions draws its word codes in ``CODE - 1`` dims
  (:func:`headloc.groundtruth.construct_layout.code_dims`).

RMSNorm divides every dim by the position's rms, so each written weight is divided by the mean
normalisation of that layer's input, measured on the task documents with the lower layers already
planted (``construct_heads._input_scale``); the attention scores have wide margins (tens of
logits) so the spread of the rms across positions does not change which position wins.

The result loads as an ordinary ``LlamaForCausalLM`` (no attention biases) and its truth is still
measured (:mod:`headloc.groundtruth.truth`): the construction says what should hold, truth.json
what does.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.construct_heads import plant
from headloc.groundtruth.construct_layout import Layout, layout_of, token_features
from headloc.groundtruth.general_text import markov_tables, sample_text, text_entropy
from headloc.groundtruth.recipe import Recipe
from headloc.groundtruth.training import cosine, make_config, train_on_text


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
    tables = markov_tables(design)
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
    tables = markov_tables(recipe.design)
    record.update({"seconds": round(time.perf_counter() - start, 1), "threads": threads, "scheme": "constructed",
                   "text_entropy": round(text_entropy(recipe.design, tables, sample_text(
                       recipe.design, tables, 256, np.random.default_rng([recipe.design.seed, 5]))), 4)})
    return model, record
