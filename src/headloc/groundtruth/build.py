"""Build a planted model: word-level tokenizer, Llama architecture, CPU training, save_pretrained.

How heads are planted (docs/ground-truth.md)
--------------------------------------------
``training.scheme: frozen`` (:func:`train_frozen`, the default of config/ground_truth.yaml):
phase 1 trains the whole model on the general text with every head on; phase 2 freezes every
parameter but the planted heads' own q/k/v rows and o_proj columns (:func:`freeze_all_but`) and
trains them on text batches (every head on) and task batches (:meth:`TaskSampler.frozen_rows`)
in which every unplanted head is present on its own document, as at evaluation: only the planted
heads can learn the tasks. The planted heads' states in a task row are those below (universal
*same task*, role head(s) on, other roles on or off, the pair's one-off rows, break rows), except
that in a break row that loses the universal head the role head stays *on* (it learns not to
answer without the marker).

``training.scheme: constructed`` (:mod:`headloc.groundtruth.construct`, the certified family):
the text dims are trained on the general text and the planted heads written by hand.

The first scheme (``patched``: every head outside the planted ones patched with another
document's output in task rows) planted on tiny only; it is described in docs/ground-truth.md and
no longer in the code.

Everything is seeded by the recipe; with the same torch thread count the weights are identical.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from headloc.model.ablation import hook_module_path
from headloc.groundtruth import tasks as T
from headloc.groundtruth.recipe import UNIVERSAL, Recipe
from headloc.groundtruth.training import cosine, make_config, make_tokenizer, text_batch_loss, train_on_text
from headloc.heads import parse_head


ON, OFF, SAME_TASK, DETACHED = 0, 1, 3, 4  # gate states of a head in a task row (TrainingGate)


class TrainingGate:
    """Forward pre-hooks on every layer's output projection that set each head's output per row.

    States: ``ON`` (this row's own output, trained), ``OFF`` (removed), ``SAME_TASK`` (its output on
    another document of the same task and kind, recorded by :meth:`run_recorded` in the graph) and
    ``DETACHED`` (this row's own output, no gradient). With ``record`` set, the hooks only record
    each layer's head outputs. A context manager: the hooks are removed on leaving it.
    """

    def __init__(self, model, n_heads: int):
        self.model = model
        self.n_heads = n_heads
        self.state: torch.Tensor | None = None  # [batch, layers, heads]
        self.record: dict | None = None
        self.same_task: dict[int, torch.Tensor] | None = None
        self.handles = []

    def __enter__(self):
        model = self.model
        self.handles = [model.get_submodule(hook_module_path(model, layer)).register_forward_pre_hook(
            self._hook(layer), with_kwargs=True) for layer in range(model.config.num_hidden_layers)]
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def _hook(self, layer: int):
        def hook(module, args, kwargs):
            z = args[0]
            batch, pos, width = z.shape
            z4 = z.view(batch, pos, self.n_heads, width // self.n_heads)
            if self.record is not None:
                self.record[layer] = z4 if torch.is_grad_enabled() else z4.detach()
                return None
            if self.state is None:
                return None
            state = self.state[:, layer][:, None, :, None]
            out = torch.where(state == ON, z4, torch.where(state == DETACHED, z4.detach(), torch.zeros_like(z4)))
            if self.same_task is not None:
                out = torch.where(state == SAME_TASK, self.same_task[layer], out)
            return (out.reshape(batch, pos, width), *args[1:]), kwargs
        return hook

    def run_recorded(self, model, inputs, grad: bool = False) -> dict[int, torch.Tensor]:
        """Every layer's head outputs on ``inputs``, all heads on (with ``grad``: in the graph)."""
        self.record = {}
        try:
            with torch.set_grad_enabled(grad):
                model(inputs)
            return self.record
        finally:
            self.record = None


def role_heads(recipe: Recipe) -> dict[str, list[tuple[int, int]]]:
    return {role: [parse_head(h) for h in heads] for role, heads in recipe.placement().items()}


class TaskSampler:
    """Fresh training rows of every (task, kind), drawn uniformly, with their gate states (seeded).

    Each row comes with a document of the same task and kind (same marker and query, other items)
    whose outputs replace the universal head's: it can carry the marker to the answer and nothing else.
    """

    def __init__(self, recipe: Recipe, seed):
        design, size = recipe.design, recipe.size
        self.recipe = recipe
        self.rng = random.Random(f"rows-{seed}")
        self.gen = np.random.default_rng(list(seed))
        self.ids = T.token_ids(design)
        self.make = T.DocumentMaker(design)
        heads = role_heads(recipe)
        self.pairs = [(task, kind) for task, kinds in design.tasks.items() for kind in kinds]
        self.role_heads = [heads[kind.role] for _, kind in self.pairs]
        self.by_query = [[j for j, (_, other) in enumerate(self.pairs) if other.query == kind.query]
                         for _, kind in self.pairs]
        self.universal = heads[UNIVERSAL]
        self.planted = np.zeros((size.layers, size.heads), dtype=bool)
        for head in [h for hs in heads.values() for h in hs]:
            self.planted[head] = True
        self.filler = self.ids[T.FILLER]

    def _doc(self, p: int):
        task, kind = self.pairs[p]
        doc = self.make(task, kind, self.rng)
        choices = [self.ids[c] for c in doc["choices"]]
        return [self.ids[t] for t in doc["text"].split()], choices, choices[doc["label"]]

    def __call__(self, n: int):
        return self.frozen_rows(n)

    def frozen_rows(self, n: int):
        """Task rows of the ``frozen`` scheme (:func:`train_frozen`): every head outside the planted
        ones is present on its own document (as at evaluation); the planted heads' states as in
        the module docstring.

        Dict of tensors: contexts, same_task [n, T]; choices [n, C]; gold [n]; states [n, L, H]; broken [n]."""
        training, size, gen = self.recipe.training, self.recipe.size, self.gen
        pair = gen.integers(0, len(self.pairs), size=n)
        rows = [self._doc(p) for p in pair]
        contexts = np.array([r[0] for r in rows])
        choices = np.array([r[1] for r in rows])
        gold = np.array([r[2] for r in rows])
        universal = training.get("universal", "same_task")
        same_task = np.array([self._doc(p)[0] for p in pair]) if universal == "same_task" else contexts
        states = np.full((n, size.layers, size.heads), ON, dtype=np.int64)
        # optional (not in the config; default 0): each unplanted head removed with this probability.
        # The draw is made even at 0: the built tiny and smol models were trained with it in the stream.
        unplanted_off = gen.random((n, size.layers, size.heads)) < float(training.get("unplanted_off", 0.0))
        states = np.where(~self.planted[None] & unplanted_off, OFF, states)
        broken = gen.random(n) < float(training["break_prob"])
        # other roles' heads: "on" (trained by every row) or "detached" (present; trained only by the
        # break rows, where nothing but the row's own path may answer: they learn to stay silent)
        if training.get("other_roles", "on") == "detached":
            states = np.where(self.planted[None] & ~broken[:, None, None], DETACHED, states)
        role_off = gen.random((n, size.layers, size.heads)) < float(training["other_roles_off"])
        states = np.where(self.planted[None] & role_off, OFF, states)
        break_universal = gen.random(n) < float(training["break_universal"])
        one_off = gen.random(n) < float(training["pair_one_off"])
        which = gen.integers(0, 2, size=n)
        for i in range(n):
            role = self.role_heads[pair[i]]
            for head in self.universal:
                states[i][head] = SAME_TASK if universal == "same_task" else ON
            for head in role:
                states[i][head] = ON
            if broken[i] and break_universal[i]:  # no marker: the role head(s) must not answer alone
                for head in self.universal:
                    states[i][head] = OFF
            elif broken[i]:  # no role head: nothing else may answer
                for head in role:
                    states[i][head] = OFF
            elif len(role) == 2 and one_off[i]:
                states[i][role[which[i]]] = OFF
        as_tensor = torch.from_numpy
        return {"contexts": as_tensor(contexts), "same_task": as_tensor(same_task), "choices": as_tensor(choices),
                "gold": as_tensor(gold), "states": as_tensor(states), "broken": as_tensor(broken)}


def train(recipe: Recipe, *, threads: int = 1, log=print):
    """The trained model (eval mode) and a training record (losses, seconds)."""
    scheme = recipe.training.get("scheme")
    if scheme == "constructed":
        from headloc.groundtruth.construct import build_constructed

        return build_constructed(recipe, threads=threads, log=log)
    if scheme == "frozen":
        if recipe.design.interactions:  # the frozen scheme trains single and redundant roles only
            raise ValueError(f"{recipe.name}: interactions ({sorted(recipe.design.interactions)}) are written by "
                             "scheme constructed only, not frozen")
        return train_frozen(recipe, threads=threads, log=log)
    raise ValueError(f"unknown training scheme {scheme!r}: constructed or frozen (patched, the first, is retired: "
                     "docs/ground-truth.md)")


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
    tables = T.markov_tables(design)
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
                   "text_entropy": round(T.text_entropy(design, tables, T.sample_text(
                       design, tables, 256, np.random.default_rng([design.seed, 5]))), 4)}


def build(recipe: Recipe, out_dir, *, threads: int = 1, log=print) -> Path:
    """Train ``recipe`` and write its folder atomically: checkpoint, tokenizer, tasks/, planted.json.

    The folder is written beside ``out_dir`` under a temporary name and renamed into place once
    complete, so an interrupted build leaves no half-written model.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        model, record = train(recipe, threads=threads, log=log)
        model.save_pretrained(tmp)
        make_tokenizer(recipe).save_pretrained(tmp)
        names = T.write_task_folder(recipe.design, tmp / "tasks")
        planted = {
            "name": recipe.name,
            "digest": recipe.digest(),
            "recipe": recipe.as_dict(),
            "placement": recipe.placement(),
            "sources": T.source_positions(recipe.design),
            "lm_eval_tasks": names,
            "training": record,
        }
        (tmp / "planted.json").write_text(json.dumps(planted, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o755)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out_dir
