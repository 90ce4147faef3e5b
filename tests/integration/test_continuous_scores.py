"""Continuous search scores: the margin and log-likelihood variants of ioi, capitals and induction,
through real lm-eval on a tiny random model, against log-likelihoods computed here with a plain
transformers forward pass."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from headloc.data.datasets import build_docs, write_jsonl
from headloc.engine.evaluation import MaskEvaluator
from headloc.engine.lm_eval_tasks import TaskSpec


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def data_file(tmp_path_factory, name):
    path = tmp_path_factory.mktemp(name) / f"{name}.jsonl"
    docs = build_docs(name, n_docs=5, seed=0)
    write_jsonl(docs, path)
    return path, docs


def continuation_loglik(model, tokenizer, context, continuation):
    """log P(continuation | context), split the way lm-eval's HFLM splits it (context + " " +
    continuation encoded whole, the context's tokens cut off the front)."""
    whole = tokenizer(context + " " + continuation, add_special_tokens=False)["input_ids"]
    n_context = len(tokenizer(context, add_special_tokens=False)["input_ids"])
    ids = torch.tensor([whole])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0, :-1].double(), dim=-1)
    positions = torch.arange(n_context - 1, len(whole) - 1)
    return float(logprobs[positions, ids[0, n_context:]].sum())


def evaluate(model, tokenizer, task, metric, path):
    spec = TaskSpec(task, metric=metric, dataset_kwargs={"data_file": str(path)})
    return MaskEvaluator(model, tokenizer, spec, batch_size=4).evaluate().score


def test_ioi_margin_is_the_gold_names_log_likelihood_lead(model, tokenizer, tmp_path_factory):
    path, docs = data_file(tmp_path_factory, "ioi")
    expected = []
    for doc in docs:
        logliks = [continuation_loglik(model, tokenizer, doc["text"], choice) for choice in doc["choices"]]
        gold = doc["label"]
        expected.append(logliks[gold] - max(ll for i, ll in enumerate(logliks) if i != gold))
    assert evaluate(model, tokenizer, "headloc_ioi_margin", "margin", path) == pytest.approx(np.mean(expected),
                                                                                              abs=1e-4)


@pytest.mark.parametrize("name", ["capitals", "induction"])
def test_loglik_variants_score_the_gold_continuation(model, tokenizer, tmp_path_factory, name):
    path, docs = data_file(tmp_path_factory, name)
    if name == "capitals":
        pairs = [(f"What is the capital of {d['country']}?\nThe capital of {d['country']} is", d["capital"])
                 for d in docs]
    else:
        pairs = [(d["text"], " ".join(d["target"])) for d in docs]
    expected = np.mean([continuation_loglik(model, tokenizer, context, gold) for context, gold in pairs])
    assert evaluate(model, tokenizer, f"headloc_{name}_loglik", "loglik", path) == pytest.approx(expected, abs=1e-4)
