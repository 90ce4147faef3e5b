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
tokens split off). Scoring such pairs under a head gate is :mod:`headloc.engine.gold_scoring`;
what a gradient method spent and found, :mod:`headloc.engine.gradient_result`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headloc.data import TASKS_DIR
from headloc.engine.lm_eval_tasks import FEWSHOT_SEED, TaskSpec, load_task


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


__all__ = ["Example", "encode_pair", "task_examples"]
