"""Attribution patching (search method ``attribution``): each head's ablation effect to first order.

The score is the mean, over the identification documents, of the log-likelihood of the gold
continuation (:func:`headloc.engine.supervision.task_examples`) with every head's output scaled by its
gate. Ablating head ``h`` moves its gate from 1 to 0, so to first order

    score(gate with g_h = 0) - score(gate = 1)  ~=  -d score / d g_h  at gate = 1,

and the estimated effect of ablating ``h`` is ``-grad_h`` (negative = the score drops: the Lasso's
sign). One forward and one backward pass per batch gives every head's estimate at once: the
cheapest search there is (about 3 masked evaluations' worth of compute, see
:class:`headloc.engine.gradient_result.Cost`), and only a linearisation: a head whose effect is non-linear in
its gate (saturating softmax, heads that only matter together) is misjudged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from headloc.heads import HeadGeometry
from headloc.engine.gold_scoring import batches, continuation_logprobs, frozen, make_batch, pad_id_of
from headloc.engine.gradient_result import Cost, MethodResult, head_map, total_tokens
from headloc.engine.supervision import Example


def rank_by_effect(effects: np.ndarray) -> list[int]:
    """Head indices, most negative effect first; equal effects go to the lower index."""
    effects = np.asarray(effects, dtype=float)
    return [int(i) for i in np.lexsort((np.arange(len(effects)), effects))]


def attribution(model, examples: Sequence[Example], *, batch_size: int = 16, pad_id: int | None = None,
                max_length: int | None = None, background: Sequence[int] = ()) -> MethodResult:
    """First-order ablation effect of every head on the gold continuations' mean log-likelihood.

    Parameters
    ----------
    model : a transformers causal LM headloc can gate (see ``headloc.model.projections.output_projections``).
    examples : the identification documents' (context, gold continuation) pairs.
    batch_size : documents per forward+backward pass (memory only: the result does not depend on it).
    pad_id : padding token id (never scored); default: the model config's pad or EOS id.
    max_length : cut contexts on the left to this many tokens (lm-eval's rule); default: no cut.
    background : heads (flat indices) ablated throughout: the gradient is taken with their gates at
        0, so each other head's estimate is its effect beside them (greedy's question, to first order).

    Returns
    -------
    MethodResult with ``effects[h] = -d score / d g_h`` (the estimated score change when head ``h``
    is ablated, in nats of mean per-document log-likelihood), ``ranking`` most negative first
    (ties: lower head index), ``baseline`` the unablated score, ``extra["gradient"]`` the raw
    gradient as {head: value}.
    """
    if not examples:
        raise ValueError("attribution needs at least one document")
    geometry = HeadGeometry.of(model.config)
    pad = pad_id_of(model=model) if pad_id is None else pad_id
    device = next(model.parameters()).device
    gate = torch.ones(geometry.n_layers, geometry.n_heads, dtype=torch.float32, device=device)
    gate.view(-1)[list(background)] = 0.0
    gate.requires_grad_(True)
    cost = Cost(eval_tokens=total_tokens(examples))
    started, score = time.perf_counter(), 0.0
    with frozen(model):
        for chunk in batches(examples, batch_size):
            batch = make_batch(chunk, pad_id=pad, max_length=max_length, device=device)
            logprobs = continuation_logprobs(model, batch, gate)  # [docs, 1, width]
            part = logprobs.sum() / len(examples)
            part.backward()
            score += float(part.detach())
            cost.add(batch, n_gates=1, backward=True)
    cost.seconds = time.perf_counter() - started
    gradient = gate.grad.detach().double().cpu().numpy().reshape(-1)
    effects = -gradient
    return MethodResult(
        method="attribution", geometry=geometry, ranking=rank_by_effect(effects), effects=effects, cost=cost,
        baseline=score,
        extra={"score": "mean log-likelihood of the gold continuation (nats per document)",
               "gradient": head_map(gradient, geometry)},
    )
