"""The task rows of the ``frozen`` scheme (:mod:`headloc.groundtruth.frozen`), and the gate that sets
each head's output in them.

In a task row every head outside the planted ones is present on its own document, as at evaluation,
so that only the planted heads can learn the tasks. The planted heads' states in a task row: the
universal head *same task*, the row's role head(s) on, other roles on or off, the pair's one-off
rows, break rows; in a break row that loses the universal head the role head stays *on* (it learns
not to answer without the marker).
"""

from __future__ import annotations

import random

import numpy as np
import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.design import UNIVERSAL
from headloc.groundtruth.recipe import Recipe
from headloc.heads import parse_head
from headloc.model.ablation import hook_module_path

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
        """Task rows of the ``frozen`` scheme (:func:`headloc.groundtruth.frozen.train_frozen`): every
        head outside the planted ones is present on its own document (as at evaluation); the planted
        heads' states as in the module docstring.

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
