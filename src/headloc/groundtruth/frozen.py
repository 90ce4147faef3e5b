"""The ``frozen`` scheme of planted models (:func:`train_frozen`): the whole model learns the general
text, then only the planted heads learn the tasks, every other parameter frozen (:func:`freeze_all_but`).
Its task rows are :mod:`headloc.groundtruth.frozen_rows`'s.
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch

from headloc.groundtruth.frozen_rows import TaskSampler, TrainingGate
from headloc.groundtruth.general_text import markov_tables, sample_text, text_entropy
from headloc.groundtruth.recipe import Recipe
from headloc.groundtruth.training import cosine, make_config, text_batch_loss, train_on_text


def freeze_all_but(model, heads) -> list[torch.nn.Parameter]:
    """Freeze every parameter but the q/k/v rows and o_proj columns of ``heads`` ((layer, head)).

    The shared q/k/v/o matrices of a layer with a planted head stay trainable, with a gradient
    hook that zeroes every other head's slice (o_proj's bias is shared by all heads: frozen).
    Returns the trainable parameters. With a fresh Adam(W) optimiser and no weight decay, a slice
    whose gradient is always zero never moves."""
    d = model.config.head_dim
    for param in model.parameters():
        param.requires_grad_(False)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    trainable = []
    for layer, hs in sorted(by_layer.items()):
        attn = model.model.layers[layer].self_attn
        keep = torch.zeros(attn.q_proj.out_features, dtype=torch.bool)
        for head in hs:
            keep[head * d:(head + 1) * d] = True
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            for param, mask in ((proj.weight, keep[:, None].float()), (proj.bias, keep.float())):
                param.requires_grad_(True)
                param.register_hook(lambda grad, mask=mask: grad * mask)
                trainable.append(param)
        attn.o_proj.weight.requires_grad_(True)
        attn.o_proj.weight.register_hook(lambda grad, mask=keep[None, :].float(): grad * mask)
        trainable.append(attn.o_proj.weight)
    return trainable


def _task_loss(logp: torch.Tensor, rows: dict) -> tuple[torch.Tensor, float]:
    """Task rows' loss (the gold's, or a uniform choice between the answers in a break row) and the
    accuracy of the rows that are not broken."""
    choices, golds, broken = rows["choices"], rows["gold"], rows["broken"]
    gold_loss = -logp.gather(1, golds[:, None])[:, 0]
    uniform_loss = -logp.gather(1, choices).mean(1)
    with torch.no_grad():
        picked = choices.gather(1, logp.gather(1, choices).argmax(1, keepdim=True))[:, 0]
        acc = float((picked == golds)[~broken].float().mean())
    return torch.where(broken, uniform_loss, gold_loss).mean(), acc


def train_frozen(recipe: Recipe, *, threads: int = 1, log=print):
    """The ``frozen`` scheme: general text with every head trained, then only the planted heads learn the tasks.

    Phase 1 (``text_share`` of ``steps``): the whole model on the general text, every head on.
    Phase 2 (the rest): every parameter frozen but the planted heads' own q/k/v rows and o_proj
    columns (:func:`freeze_all_but`); each step has a text batch (every head on, so the text loss
    does not drift) and a task batch (:meth:`TaskSampler.frozen_rows`) in which every unplanted
    head is present on its own document, as at evaluation.
    """
    from transformers import LlamaForCausalLM

    torch.set_num_threads(threads)
    size, design, training = recipe.size, recipe.design, recipe.training
    torch.manual_seed(size.seed)
    model = LlamaForCausalLM(make_config(recipe))
    model.train()
    text_rng = np.random.default_rng([design.seed, size.seed, 11])
    tables = markov_tables(design)
    warmup = int(training.get("warmup", 50))
    text_steps = int(round(float(training["text_share"]) * size.steps))
    task_steps = size.steps - text_steps
    history, start = [], time.perf_counter()

    def note(record):
        record["seconds"] = round(time.perf_counter() - start, 1)
        history.append(record)
        log(json.dumps(record))

    # phase 1: the general text, every parameter, every head on
    optimizer = torch.optim.AdamW(model.parameters(), lr=size.lr, weight_decay=float(training.get("weight_decay", 0)),
                                  betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine(warmup, text_steps))
    def on_text_step(step, loss):
        if step % 50 == 0 or step == text_steps - 1:
            note({"phase": 1, "step": step, "text_loss": round(float(loss.detach()), 4)})

    train_on_text(model, list(model.parameters()), optimizer, scheduler, design, tables, size.text_batch, text_rng,
                  text_steps, on_text_step)

    # phase 2: the tasks, through the planted heads only
    trainable = freeze_all_but(model, recipe.planted())
    optimizer = torch.optim.AdamW(trainable, lr=size.lr * float(training.get("task_lr", 1.0)), weight_decay=0.0,
                                  betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine(warmup, task_steps))
    sampler = TaskSampler(recipe, (design.seed, size.seed, 13))
    task_weight = float(training.get("task_weight", 1.0))
    universal_same_task = training.get("universal", "same_task") == "same_task"
    with TrainingGate(model, size.heads) as gate:
        for step in range(task_steps):
            text_loss = text_batch_loss(model, design, tables, size.text_batch, text_rng)
            rows = sampler(size.task_batch)
            if universal_same_task:
                gate.same_task = gate.run_recorded(model, rows["same_task"], grad=True)
            gate.state = rows["states"]
            logp = torch.log_softmax(model(rows["contexts"]).logits[:, -1], dim=-1)
            gate.state = None
            task_loss, acc = _task_loss(logp, rows)
            optimizer.zero_grad()
            (text_loss + task_weight * task_loss).backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            scheduler.step()
            if step % 50 == 0 or step == task_steps - 1:
                note({"phase": 2, "step": text_steps + step, "text_loss": round(float(text_loss.detach()), 4),
                      "task_loss": round(float(task_loss.detach()), 4), "task_acc": round(acc, 3)})
    for param in model.parameters():
        param.requires_grad_(True)
    model.eval()
    seconds = time.perf_counter() - start
    return model, {"seconds": round(seconds, 1), "threads": threads, "scheme": "frozen", "text_steps": text_steps,
                   "task_steps": task_steps, "history": history,
                   "text_entropy": round(text_entropy(design, tables, sample_text(
                       design, tables, 256, np.random.default_rng([design.seed, 5]))), 4)}
