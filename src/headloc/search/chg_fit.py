"""Fitting Causal Head Gating's gates (:mod:`headloc.search.chg`): eq. (1) minimised for every gate
row at once, on minibatches, each row early-stopped on the held-out documents, every pass counted.
Apart from the method: this is the optimiser's loop; which fits run, from where, and what is made of
their gates is :func:`~headloc.search.chg.chg`'s."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from headloc.engine.gold_scoring import continuation_logprobs, make_batch
from headloc.engine.supervision import Example


@dataclass
class _Stage:
    """One fit's bookkeeping, per gate row."""

    name: str
    steps_run: list[int]
    best_step: list[int]
    best_objective: list[float]
    best_holdout_nll: list[float]
    last_train_nll: list[float]


class _Fitter:
    """Runs the fits of one call to :func:`~headloc.search.chg.chg` and counts their cost."""

    def __init__(self, model, train, holdout, *, batch_size, rows_per_pass, pad, max_length, clip, grad_norm, cost,
                 generator, device):
        self.model, self.train, self.holdout = model, list(train), list(holdout)
        self.batch_size, self.rows_per_pass = batch_size, rows_per_pass
        self.pad, self.max_length, self.clip, self.grad_norm = pad, max_length, clip, grad_norm
        self.cost, self.generator, self.device = cost, generator, device
        self._order: list[int] = []

    def minibatch(self) -> list[Example]:
        """The next ``batch_size`` training documents (all of them when they fit in one batch)."""
        if len(self.train) <= self.batch_size:
            return self.train
        picked = []
        while len(picked) < self.batch_size:
            if not self._order:
                self._order = torch.randperm(len(self.train), generator=self.generator).tolist()
            picked.append(self.train[self._order.pop()])
        return picked

    def chunks(self, docs: Sequence[Example], n_gates: int):
        per_pass = max(1, self.rows_per_pass // max(1, n_gates)) if self.rows_per_pass else len(docs)
        for start in range(0, len(docs), per_pass):
            yield make_batch(docs[start:start + per_pass], pad_id=self.pad, max_length=self.max_length,
                             device=self.device)

    def nll(self, docs: Sequence[Example], theta: torch.Tensor, *, backward: bool) -> torch.Tensor:
        """NLL per gate row: each document's mean over its gold tokens, averaged over ``docs``;
        with ``backward``, its gradient too."""
        n_gates = theta.shape[0]
        total = torch.zeros(n_gates, dtype=torch.float64)
        for batch in self.chunks(docs, n_gates):
            lengths = batch.target_mask.sum(-1, keepdim=True)  # [docs, 1]
            with contextlib.nullcontext() if backward else torch.no_grad():
                logprobs = continuation_logprobs(self.model, batch, torch.sigmoid(theta))  # [docs, gates, width]
                part = -(logprobs.sum(-1) / lengths).sum(0) / len(docs)
            if backward:
                part.sum().backward()
            total += part.detach().double().cpu()
            self.cost.add(batch, n_gates=n_gates, backward=backward)
        return total

    def penalty(self, theta: torch.Tensor) -> torch.Tensor:
        """mean over heads of clip(theta), per row."""
        return theta.clamp(-self.clip, self.clip).mean(dim=(-2, -1))

    def fit(self, name, theta0, lambdas, *, steps, lr, eval_every, patience) -> tuple[torch.Tensor, _Stage]:
        """Minimise eq. (1) for each row of ``theta0`` with its own lambda; early-stop per row."""
        theta = theta0.clone().requires_grad_(True)
        rows = theta.shape[0]
        lambdas = torch.as_tensor(lambdas, dtype=theta.dtype, device=theta.device)
        optimizer = torch.optim.Adam([theta], lr=lr[0])
        best = theta0.clone()
        stage = _Stage(name, [0] * rows, [0] * rows, [float("inf")] * rows, [float("nan")] * rows,
                       [float("nan")] * rows)
        active = list(range(rows))
        misses = [0] * rows
        use_holdout = bool(self.holdout) and eval_every > 0

        def check(step):
            with torch.no_grad():
                part = theta.detach()[active]
                nll = self.nll(self.holdout, part, backward=False)
                objective = nll - (lambdas[active] * self.penalty(part)).double().cpu()
            still = []
            for k, row in enumerate(active):
                if objective[k] < stage.best_objective[row]:
                    stage.best_objective[row], stage.best_holdout_nll[row] = float(objective[k]), float(nll[k])
                    stage.best_step[row] = step
                    best[row] = theta.detach()[row]
                    misses[row] = 0
                else:
                    misses[row] += 1
                if misses[row] < patience:
                    still.append(row)
            active[:] = still

        if use_holdout:
            check(0)
        for step in range(1, steps + 1):
            if not active:
                break
            for group in optimizer.param_groups:
                group["lr"] = lr[0] + (lr[1] - lr[0]) * (step - 1) / max(1, steps - 1)
            # The active rows as a leaf of their own: each chunk's backward and the penalty's
            # accumulate into part.grad, which then becomes theta's gradient (0 for stopped rows).
            part = theta.detach()[active].requires_grad_(True)
            nll = self.nll(self.minibatch(), part, backward=True)
            (-(lambdas[active] * self.penalty(part)).sum()).backward()
            grad = part.grad
            if self.grad_norm is not None:  # per row, so rows stay independent
                norms = grad.flatten(1).norm(dim=1).clamp(min=1e-12)
                grad = grad * (self.grad_norm / norms).clamp(max=1.0)[:, None, None]
            theta.grad = torch.zeros_like(theta)
            theta.grad[active] = grad
            optimizer.step()
            for k, row in enumerate(active):
                stage.steps_run[row] = step
                stage.last_train_nll[row] = float(nll[k])
            if use_holdout and (step % eval_every == 0 or step == steps):
                check(step)
        if not use_holdout:
            best = theta.detach().clone()
            stage.best_step = list(stage.steps_run)
        return best, stage
