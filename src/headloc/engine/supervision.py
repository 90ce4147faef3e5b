"""Supervision for the gradient methods (``attribution``, ``chg``): gold continuations of a task.

A search by masked evaluation scores a task through lm-eval; a gradient method needs a
differentiable score instead, the log-likelihood of the gold continuation given the document's
context. :func:`task_examples` builds those (context, gold continuation) token pairs from the same
lm-eval task :class:`headloc.engine.evaluation.MaskEvaluator` scores, with lm-eval's own prompts
(few-shot examples with the evaluator's seed, chat template when ``TaskSpec.chat``):

* ``multiple_choice`` tasks: the gold choice's continuation, as lm-eval builds the request
  (``target_delimiter + choice``);
* ``loglikelihood`` tasks: the request's continuation;
* ``generate_until`` tasks: ``target_delimiter + doc_to_target(doc)`` (the first target when the
  task lists several; the delimiter is dropped under a chat template, as lm-eval does).

Text is split into tokens as lm-eval's ``HFLM`` does for a causal model (``_encode_pair``: trailing
spaces of the context move to the continuation; the pair is encoded whole and the context's
tokens split off). :func:`continuation_logprobs` scores a batch of such pairs under a head gate,
projecting to the vocabulary only at the positions that predict gold tokens.

:class:`Cost` counts what a gradient method spends and its equivalent in masked evaluations, and
:class:`MethodResult` holds what ``recovery.json`` needs (:func:`recovery_fields`).
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from headloc.model.ablation import ablate_heads
from headloc.data import TASKS_DIR
from headloc.engine.lm_eval_tasks import FEWSHOT_SEED, TaskSpec, load_task
from headloc.heads import HeadGeometry, head_name

# A fwd+bwd pass costs about three forward passes (the backward pass computes two matrix products
# per forward one; with frozen weights it skips the weight gradients, so this overcounts a little).
FWD_BWD_IN_FORWARDS = 3.0


@dataclass(frozen=True)
class Example:
    """One document's context and gold continuation, as token ids."""

    doc_id: int
    context: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def n_tokens(self) -> int:
        """Tokens a forward pass reads for this document: context and continuation but its last."""
        return len(self.context) + len(self.target) - 1


# ---------------------------------------------------------------------------------- building


def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Token ids of (context, continuation) as lm-eval's HFLM splits them for a causal model."""
    if not context:
        raise ValueError("a document has an empty context; headloc's gradient methods need one")
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation, context = context[-n_spaces:] + continuation, context[:-n_spaces]
    whole = tokenizer.encode(context + continuation)
    context_ids = tokenizer.encode(context)
    return context_ids, whole[len(context_ids):]


def _chat_template(tokenizer):
    """lm-eval's HFLM.apply_chat_template, from the tokenizer alone."""

    def apply(history, add_generation_prompt: bool = True) -> str:
        return tokenizer.apply_chat_template(history, tokenize=False, add_generation_prompt=add_generation_prompt,
                                             continue_final_message=not add_generation_prompt)

    return apply


def _gold_pair(task, instances, chat: bool) -> tuple[str, str]:
    """The (context, gold continuation) texts of one document's lm-eval requests: the task's own
    target (:func:`gold_text`), after lm-eval's delimiter where lm-eval puts one."""
    first = instances[0]
    kind = first.request_type
    if kind == "loglikelihood" and task.OUTPUT_TYPE == "multiple_choice":
        gold = task.doc_to_target(first.doc)
        choices = task.doc_to_choice(first.doc)
        if isinstance(gold, str):
            gold = choices.index(gold) if gold in choices else gold
        if isinstance(gold, (list, tuple)):
            gold = gold[0]
        by_choice = {instance.idx: instance for instance in instances}
        if not isinstance(gold, (int, np.integer)) or int(gold) not in by_choice:
            raise ValueError(f"gold {gold!r} is not one of the {len(choices)} choices {choices!r}")
        gold_text(choices[int(gold)], f"its gold choice (doc_to_target {int(gold)} of doc_to_choice)")
        context, continuation = by_choice[int(gold)].arguments[:2]  # a multiple-input task varies the context
        return context, continuation
    if kind == "loglikelihood":
        return first.arguments[0], gold_text(first.arguments[1], "its target (doc_to_target)")
    if kind == "generate_until":
        target = task.doc_to_target(first.doc)
        if isinstance(target, (list, tuple)):
            target = target[0] if target else ""
        if isinstance(target, (int, np.integer)) and task.config.doc_to_choice is not None:
            target = task.doc_to_choice(first.doc)[int(target)]
        delimiter = "" if chat else task.config.target_delimiter
        return first.arguments[0], f"{delimiter}{gold_text(target, 'its target (doc_to_target)')}"
    raise ValueError(f"request type {kind!r} has no gold continuation; supported: "
                     "loglikelihood, multiple_choice, generate_until")


def gold_text(target, what: str) -> str:
    """``target`` when it is text with something in it besides spaces; else ValueError: an empty
    target would make the gold continuation the delimiter (or nothing), and a gradient of it says
    nothing about the task."""
    if target is None or (isinstance(target, str) and not target.strip()):
        raise ValueError(f"{what} is empty ({target!r}); a gradient method differentiates the gold continuation, "
                         "so every document needs a non-empty target")
    return target if isinstance(target, str) else str(target)


def _document(doc, limit: int = 160) -> str:
    """A document, shortened for an error message."""
    text = repr(doc)
    return text if len(text) <= limit else text[:limit] + "...}"


def task_examples(tokenizer, task: TaskSpec, *, include_path=TASKS_DIR, limit: int | None = None) -> list[Example]:
    """(context, gold continuation) token pairs of ``task``'s documents, in lm-eval's document order.

    ``task`` is the same :class:`~headloc.engine.lm_eval_tasks.TaskSpec` a masked evaluation scores (with its
    ``data_file`` or ``doc_ids``: the identification subset), loaded as the masked evaluation loads
    it (:func:`headloc.engine.lm_eval_tasks.load_task`); ``limit`` keeps the first documents only.
    """
    task_dict = load_task(task, include_path)
    loaded = task_dict["tasks"] if "tasks" in task_dict else task_dict
    lm_task = loaded[task.lm_eval_task] if task.lm_eval_task in loaded else next(iter(loaded.values()))
    lm_task.set_fewshot_seed(FEWSHOT_SEED)
    samples = None if task.doc_ids is None else list(task.doc_ids)
    lm_task.build_all_requests(limit=limit, samples=samples, apply_chat_template=task.chat,
                               chat_template=_chat_template(tokenizer) if task.chat else None)
    by_doc: dict[int, list] = {}
    for instance in lm_task.instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    examples = []
    for doc_id in sorted(by_doc):
        # with samples, lm-eval numbers the chosen documents 0.. in the task's order: keep the task's own index
        original = doc_id if samples is None else sorted(set(samples))[doc_id]
        where = f"document {original} of {task.lm_eval_task} ({_document(by_doc[doc_id][0].doc)})"
        try:
            pair = _gold_pair(lm_task, by_doc[doc_id], task.chat)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        context_ids, target_ids = encode_pair(tokenizer, *pair)
        if not target_ids:
            raise ValueError(f"{where}: the gold continuation has no tokens")
        examples.append(Example(original, tuple(context_ids), tuple(target_ids)))
    if not examples:
        raise ValueError(f"task {task.lm_eval_task} built no documents")
    return examples


# ---------------------------------------------------------------------------------- scoring


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


# ---------------------------------------------------------------------------------- results


@dataclass
class Cost:
    """What a gradient method spent, and its equivalent in masked evaluations.

    ``fwd_bwd_*`` count passes with a backward pass, ``forward_*`` forward-only passes (CHG's
    held-out checks); rows are (document, gate) pairs, tokens the real tokens those rows read.
    ``eval_tokens`` is what one masked evaluation reads: one forward pass over the identification
    subset, every document once (for a generation task a masked evaluation also decodes, so the
    equivalent flatters masked evaluation a little). ``n_evals`` =
    ``(3 * fwd_bwd_tokens + forward_tokens) / eval_tokens``, rounded up.
    """

    eval_tokens: int
    fwd_bwd_passes: int = 0
    fwd_bwd_rows: int = 0
    fwd_bwd_tokens: int = 0
    forward_passes: int = 0
    forward_rows: int = 0
    forward_tokens: int = 0
    seconds: float = 0.0

    def add(self, batch: Batch, n_gates: int, backward: bool) -> None:
        rows, tokens = batch.input_ids.shape[0] * n_gates, batch.n_tokens * n_gates
        if backward:
            self.fwd_bwd_passes += 1
            self.fwd_bwd_rows += rows
            self.fwd_bwd_tokens += tokens
        else:
            self.forward_passes += 1
            self.forward_rows += rows
            self.forward_tokens += tokens

    @property
    def eval_equivalent(self) -> float:
        return (FWD_BWD_IN_FORWARDS * self.fwd_bwd_tokens + self.forward_tokens) / self.eval_tokens

    @property
    def n_evals(self) -> int:
        return int(math.ceil(self.eval_equivalent - 1e-9))

    def as_dict(self) -> dict:
        return {**asdict(self), "eval_equivalent": self.eval_equivalent, "n_evals": self.n_evals}


@dataclass
class MethodResult:
    """A gradient method's answer, in the terms of ``recovery.json``.

    ``effects`` holds one number per head (flat index), more negative = more important, the sign
    of the Lasso's coefficients; ``ranking`` the flat head indices, most important first;
    ``baseline`` the unablated score the effects are relative to (None where there is none);
    ``extra`` the method's own fields (JSON-ready).
    """

    method: str
    geometry: HeadGeometry
    ranking: list[int]
    effects: np.ndarray
    cost: Cost
    baseline: float | None = None
    extra: dict = field(default_factory=dict)

    def names(self) -> list[str]:
        return [head_name(i, self.geometry.n_heads) for i in range(self.geometry.total)]


def recovery_fields(result: MethodResult) -> dict:
    """The method-dependent part of ``recovery.json``, as ``scripts/recover_heads.py`` writes it.

    Keys: ``n_evals`` (masked-evaluation equivalent), ``alpha`` and ``r2`` (None: no Lasso),
    ``intercept`` (the unablated score), ``ranking`` (head names, most important first), ``coef``
    (head name -> effect), ``cost`` (:class:`Cost` in full) and the method's own fields.
    """
    names = result.names()
    return {
        "n_evals": result.cost.n_evals,
        "alpha": None,
        "r2": None,
        "intercept": result.baseline,
        "ranking": [names[i] for i in result.ranking],
        "coef": {name: float(value) for name, value in zip(names, result.effects)},
        "cost": result.cost.as_dict(),
        **result.extra,
    }


def head_map(values, geometry: HeadGeometry) -> dict[str, float]:
    """A flat per-head array as {head name: value}."""
    values = np.asarray(values, dtype=float).reshape(-1)
    return {head_name(i, geometry.n_heads): float(v) for i, v in enumerate(values)}


def total_tokens(examples: Sequence[Example]) -> int:
    """Tokens one forward pass over ``examples`` reads (a masked evaluation's size)."""
    return int(sum(example.n_tokens for example in examples))


__all__ = ["Batch", "Cost", "Example", "MethodResult", "batches", "continuation_logprobs", "encode_pair",
           "frozen", "head_map", "make_batch", "pad_id_of", "recovery_fields", "task_examples",
           "total_tokens"]
