"""Each head's evidence through headloc.locate, the path a notebook user takes: on the planted model
(one head carries the task by construction) the planted head is found above the noise with an
interval below 0 and no other head is; on the same model asked for something it cannot do, on scores
that never move, and on an lm-eval task a random model cannot do, every method says "no head found
above noise" with its reason; a callable's one number is said to be not assessed. The workflow's
rules are checked on a workflow run (tests/workflow/test_workflow.py, test_a_random_model_finds_no_head)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import headloc
from conftest import tiny_llama
from planted import FIRST_TOKEN, LENGTH, PLANTED, VOCAB, planted_model

PLANTED_HEAD = "L{}H{}".format(*PLANTED)
METHODS = {"greedy1s": {}, "group_testing": {"budget": 12}, "cs_stratified": {"budget": 16, "alpha": 0.001}}


def rows(n=64, seed=5):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_TOKEN, VOCAB, (n, LENGTH), generator=generator)


def repeat_first(model):
    """Per document: 1 where the model repeats the row's first token at the end."""
    tokens = rows()
    with torch.no_grad():
        predicted = model(tokens).logits[:, -1].argmax(-1)
    return (predicted == tokens[:, 0]).float().numpy()


def random_target(model):
    """Per document: 1 where the model predicts a token drawn at random: a task it cannot do."""
    tokens = rows()
    target = torch.randint(FIRST_TOKEN, VOCAB, (len(tokens),), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        predicted = model(tokens).logits[:, -1].argmax(-1)
    return (predicted == target).float().numpy()


def search(task, method):
    return headloc.locate(planted_model(), None, task, method=method, top_k=2, sparsity=0.25, progress=False,
                          **METHODS[method])


@pytest.mark.parametrize("method", list(METHODS))
def test_the_planted_head_is_found_above_the_noise_and_no_other(method):
    found = search(repeat_first, method)
    assert found.found == [PLANTED_HEAD], (found.found, found.no_head_found)
    low, high = found.intervals[PLANTED_HEAD]
    assert low <= found.values[PLANTED_HEAD] <= high < 0
    assert found.record["status"][PLANTED_HEAD] in ("measured", "estimated")
    assert found.record["p_top_k"][PLANTED_HEAD] > 0.9
    assert f"found above noise: {PLANTED_HEAD}" in repr(found)
    frame = found.to_frame()
    row = frame[frame["head"] == PLANTED_HEAD].iloc[0]
    assert row["found"] and row["high"] < 0 and row["status"] == found.record["status"][PLANTED_HEAD]
    assert frame["found"].sum() == 1


@pytest.mark.parametrize("method", list(METHODS))
def test_a_task_the_model_cannot_do_finds_no_head(method):
    found = search(random_target, method)
    assert found.found == [], found.found
    assert found.no_head_found
    assert "no head found above noise: " in repr(found)


@pytest.mark.parametrize("method", list(METHODS))
def test_scores_that_never_move_find_no_head_and_never_name_head_zero(method):
    found = search(lambda model: np.array([1.0, 0.0, 0.0, 0.0]), method)
    assert found.found == []
    assert "do not vary" in found.no_head_found and "0.25" in found.no_head_found
    assert "no head found above noise" in found.heatmap()._suptitle.get_text()


def test_one_number_per_head_set_is_not_assessed():
    found = search(lambda model: float(repeat_first(model).mean()), "greedy1s")
    assert found.found is None and found.no_head_found.startswith("not assessed")
    assert set(found.intervals.values()) == {None}
    assert "evidence: not assessed" in repr(found)


def test_an_lm_eval_task_keeps_per_document_scores(tokenizer):
    """headloc_ioi's accuracy per document reaches the evidence: every head of one-shot greedy is
    measured with an interval, and a random model carries no capability."""
    found = headloc.locate(tiny_llama(len(tokenizer)), tokenizer, "headloc_ioi", method="greedy1s", top_k=2,
                           documents=6, batch_size=8, progress=False)
    assert set(found.record["status"].values()) == {"measured"}
    assert found.record["evidence"]["documents"] == 6
    assert all(interval is None or interval[0] <= found.values[h] <= interval[1]
               for h, interval in found.intervals.items())
    assert found.found == [] and found.no_head_found
    assert isinstance(found.to_frame(), pd.DataFrame)


FLIPPED_TASK = """\
task: ioi_flipped
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
test_split: test
output_type: multiple_choice
doc_to_text: text
doc_to_choice: choices
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["group_testing", "guided_greedy"])
def test_smollm2_finds_no_head_for_a_task_it_cannot_do(method, smollm2_dir, tmp_path):
    """SmolLM2 does IOI; asked for the subject instead of the indirect object (each document's label
    flipped), it scores near 0: no head's ablation lowers that further, and no head is found."""
    import json

    from headloc.model.loading import load_model
    from headloc.tasks.utils import load_ioi

    docs = load_ioi(n_docs=12)["test"]
    (tmp_path / "docs.jsonl").write_text("".join(
        json.dumps({"text": d["text"], "choices": d["choices"], "label": 1 - d["label"]}) + "\n" for d in docs))
    (tmp_path / "ioi_flipped.yaml").write_text(FLIPPED_TASK.format(docs=tmp_path / "docs.jsonl"))
    model, tokenizer = load_model(str(smollm2_dir))
    settings = {"options": {"m": 4, "m_abs": 4}} if method == "guided_greedy" else {"budget": 24}
    found = headloc.locate(model, tokenizer, "ioi_flipped", include_path=[tmp_path], method=method, top_k=3,
                           batch_size=16, progress=False, **settings)
    assert found.record["intercept"] <= 0.25  # the unablated model gets (nearly) every document wrong
    assert found.found == [], (found.found, found.no_head_found)
    assert found.no_head_found and "no head found above noise" in repr(found)
