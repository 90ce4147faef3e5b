"""Scoring gold continuations under a head gate, differentiably: examples left-padded into a
:class:`Batch`, and the log-probabilities of their gold tokens (:func:`continuation_logprobs`,
projected to the vocabulary only at the positions that predict gold tokens), with what a gradient
method's loop needs around them (:func:`batches`, :func:`frozen`, :func:`pad_id_of`).

Apart from :mod:`headloc.engine.supervision`, which builds the (context, gold continuation) pairs
from an lm-eval task: this is the torch side, run on every pass of a gradient method.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from headloc.model.ablation import ablate_heads
from headloc.engine.supervision import Example


@dataclass
class Batch:
    """Examples left-padded to one width: the gold tokens sit in the last ``width`` positions.

    ``targets`` and ``target_mask`` are ``[docs, width]``: gold token ids right-aligned, and which
    of those slots hold one (a shorter continuation leaves slots on the left empty).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    targets: torch.Tensor
    target_mask: torch.Tensor
    n_tokens: int  # real (unpadded) tokens read, per gate

    @property
    def width(self) -> int:
        return self.targets.shape[1]


def make_batch(examples: Sequence[Example], *, pad_id: int = 0, max_length: int | None = None,
               device="cpu") -> Batch:
    """Left-pad ``examples``; with ``max_length`` the contexts are cut on the left as lm-eval does."""
    rows = []
    for example in examples:
        tokens = list(example.context) + list(example.target)
        if max_length is not None:
            tokens = tokens[-(max_length + 1):]
        rows.append(tokens[:-1])
    length = max(len(row) for row in rows)
    width = max(len(example.target) for example in examples)
    input_ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    targets = torch.zeros((len(rows), width), dtype=torch.long)
    target_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (row, example) in enumerate(zip(rows, examples)):
        input_ids[i, length - len(row):] = torch.tensor(row)
        attention[i, length - len(row):] = 1
        n = len(example.target)
        targets[i, width - n:] = torch.tensor(example.target)
        target_mask[i, width - n:] = True
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    return Batch(input_ids.to(device), attention.to(device), positions.to(device), targets.to(device),
                 target_mask.to(device), int(sum(len(row) for row in rows)))


def continuation_logprobs(model, batch: Batch, gate: torch.Tensor | None = None) -> torch.Tensor:
    """Log-probabilities of the gold tokens, ``[docs, gates, width]`` (0 in empty slots).

    ``gate`` is None (no ablation), ``[layers, heads]`` or ``[gates, layers, heads]``; with several
    gates every document runs once per gate in adjacent batch rows (row ``d * gates + g``). Only the
    last ``width`` positions are projected to the vocabulary (``logits_to_keep``), the ones that
    predict gold tokens when the rows are left-padded; a gate that requires grad stays
    differentiable.
    """
    n_gates = 1 if gate is None or gate.dim() == 2 else gate.shape[0]
    ids, mask, positions = batch.input_ids, batch.attention_mask, batch.position_ids
    if n_gates > 1:
        ids, mask, positions = (t.repeat_interleave(n_gates, dim=0) for t in (ids, mask, positions))
        row_gate = gate.repeat(batch.input_ids.shape[0], 1, 1)
    else:
        row_gate = gate if gate is None or gate.dim() == 2 else gate[0]
    width = batch.width
    keep = {"logits_to_keep": width} if _keeps_logits(model) else {}
    ablation = contextlib.nullcontext() if row_gate is None else ablate_heads(model, row_gate)
    with ablation:
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False, **keep).logits
    logits = logits[:, -width:].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    targets = batch.targets.repeat_interleave(n_gates, dim=0)
    gold = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    gold = gold.view(batch.input_ids.shape[0], n_gates, width)
    return gold * batch.target_mask[:, None, :]


def _keeps_logits(model) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def batches(examples: Sequence[Example], batch_size: int) -> Iterator[list[Example]]:
    """``examples`` in consecutive chunks of at most ``batch_size``."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    for start in range(0, len(examples), batch_size):
        yield list(examples[start:start + batch_size])


@contextlib.contextmanager
def frozen(model):
    """The model's weights out of autograd while open (only the gate gets a gradient)."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def pad_id_of(tokenizer=None, model=None) -> int:
    """A padding token id (never read: padded positions are masked and not scored)."""
    for source in (tokenizer, getattr(model, "config", None)):
        for name in ("pad_token_id", "eos_token_id"):
            value = getattr(source, name, None)
            if isinstance(value, (list, tuple)):
                value = value[0] if value else None
            if value is not None:
                return int(value)
    return 0


__all__ = ["Batch", "batches", "continuation_logprobs", "frozen", "make_batch", "pad_id_of"]
