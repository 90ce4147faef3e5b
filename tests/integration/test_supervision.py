"""Gold continuations of real lm-eval tasks, scored as lm-eval scores them."""

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from transformers import AutoModelForCausalLM

from headloc.model.ablation import ablate_heads
from headloc.engine.lm_eval_tasks import TaskSpec, load_task
from headloc.engine.gold_scoring import continuation_logprobs, make_batch
from headloc.engine.supervision import task_examples


def lm_eval_docs(name):
    loaded = load_task(TaskSpec(name))
    task = loaded.get("tasks", loaded)[name]
    return task, list(task.eval_docs)


def test_ioi_targets_are_the_gold_names(tokenizer):
    examples = task_examples(tokenizer, TaskSpec("headloc_ioi"), limit=6)
    task, docs = lm_eval_docs("headloc_ioi")
    assert [e.doc_id for e in examples] == list(range(6))
    for example, doc in zip(examples, docs):
        gold = task.doc_to_choice(doc)[task.doc_to_target(doc)]
        assert tokenizer.decode(example.context) == task.doc_to_text(doc)
        assert tokenizer.decode(example.target) == " " + gold
        assert list(example.context + example.target) == tokenizer.encode(task.doc_to_text(doc) + " " + gold)


def test_capitals_targets_are_the_capitals(tokenizer):
    examples = task_examples(tokenizer, TaskSpec("headloc_capitals"), limit=5)
    _, docs = lm_eval_docs("headloc_capitals")
    for example, doc in zip(examples, docs):
        assert tokenizer.decode(example.context).endswith(f"The capital of {doc['country']} is")
        assert tokenizer.decode(example.target) == " " + doc["capital"]


def test_chat_tasks_put_the_target_after_the_assistant_turn(tokenizer):
    example = task_examples(tokenizer, TaskSpec("headloc_capitals", chat=True), limit=1)[0]
    _, docs = lm_eval_docs("headloc_capitals")
    assert tokenizer.decode(example.context).rstrip().endswith("assistant")
    assert tokenizer.decode(example.target).strip() == docs[0]["capital"]


def test_scores_equal_lm_evals_loglikelihood(tiny_model_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    spec = TaskSpec("headloc_capitals")
    examples = task_examples(tokenizer, spec, limit=6)
    task, docs = lm_eval_docs("headloc_capitals")
    requests = [Instance("loglikelihood", doc, (task.doc_to_text(doc), " " + doc["capital"]), 0)
                for doc in docs[:6]]
    expected = [ll for ll, _ in HFLM(pretrained=model, tokenizer=tokenizer, batch_size=4).loglikelihood(requests)]
    gate = torch.ones(2, 4)
    gate[1, 3] = 0.0  # and with a head removed, against lm-eval on the same gate
    with torch.no_grad():
        got = continuation_logprobs(model, make_batch(examples), torch.stack([torch.ones(2, 4), gate]))
    assert got[:, 0].sum(-1).tolist() == pytest.approx(expected, abs=1e-4)
    with ablate_heads(model, gate):
        ablated = [ll for ll, _ in HFLM(pretrained=model, tokenizer=tokenizer, batch_size=4).loglikelihood(requests)]
    assert got[:, 1].sum(-1).tolist() == pytest.approx(ablated, abs=1e-4)


def test_chosen_documents_keep_their_own_indices(tokenizer):
    """A task scored on chosen document indices (TaskSpec.doc_ids, lm-eval's samples) yields those
    documents, in the task's order, under their own indices."""
    chosen = task_examples(tokenizer, TaskSpec("headloc_ioi", doc_ids=(7, 3, 5)))
    first = task_examples(tokenizer, TaskSpec("headloc_ioi"), limit=8)
    assert [e.doc_id for e in chosen] == [3, 5, 7]
    assert chosen == [first[3], first[5], first[7]]
