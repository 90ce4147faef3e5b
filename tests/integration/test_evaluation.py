"""The seam (AblatedLM, MaskEvaluator one mask at a time): real lm-eval over a tiny random model."""

import copy

import numpy as np
import pytest
from transformers import AutoModelForCausalLM

from conftest import zeroed_copy
from headloc.model.ablation import HeadGeometry
from headloc.data.datasets import build_docs, write_jsonl
from headloc.data import TASKS_DIR
from headloc.engine.evaluation import MaskEvaluator, compact_sample
from headloc.engine.lm_eval_tasks import TaskSpec
from headloc.engine.lm import AblatedLM
from headloc.heads import headset_mask


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


@pytest.fixture(scope="module")
def ioi_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "ioi.jsonl"
    write_jsonl(build_docs("ioi", n_docs=6, seed=0), path)
    return path


def ioi(path, **extra):
    return TaskSpec("headloc_ioi", dataset_kwargs={"data_file": str(path)}, **{"metric": "acc", **extra})


def loglikelihoods(result):
    return np.array([[choice[0] for choice in sample["response"]] for sample in result.samples])


def test_scores_many_masks_with_one_model_and_one_task(model, tokenizer, ioi_file):
    evaluator = MaskEvaluator(model, tokenizer, ioi(ioi_file), batch_size=4)
    geometry = evaluator.geometry
    masks = np.zeros((3, geometry.total), dtype=int)
    masks[1, [0, 5]] = 1
    results = evaluator.evaluate_masks(masks, progress=False)
    assert len(results) == 3
    assert all(len(r.samples) == 6 and 0 <= r.score <= 1 for r in results)
    assert {"doc_id", "target", "response", "acc"} <= set(results[0].samples[0])
    np.testing.assert_array_equal(loglikelihoods(results[0]), loglikelihoods(results[2]))
    assert not np.allclose(loglikelihoods(results[0]), loglikelihoods(results[1]))
    assert evaluator.lm.gate is None, "the gate is cleared after each evaluation"


def test_ablated_scores_equal_a_model_with_zeroed_heads(model, tokenizer, ioi_file):
    mask = np.zeros(HeadGeometry.of(model.config).total, dtype=int)
    mask[[1, 6]] = 1
    ablated = MaskEvaluator(model, tokenizer, ioi(ioi_file), batch_size=4).evaluate_mask(mask)
    reference = MaskEvaluator(zeroed_copy(model, mask), tokenizer, ioi(ioi_file), batch_size=4).evaluate_mask(0 * mask)
    np.testing.assert_allclose(loglikelihoods(ablated), loglikelihoods(reference), atol=1e-4)
    assert ablated.score == reference.score


def test_lm_eval_runs_the_registered_model_with_heads_ablated(model, tokenizer, tiny_model_dir, ioi_file):
    """lm-eval's own entry point builds ``headloc`` from a model_args string, as its CLI does
    (``--model headloc --model_args pretrained=DIR,heads=L0H1+L1H2 --metadata '{"data_file": ...}'``)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    def run(heads):
        manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                              metadata={"data_file": str(ioi_file)})
        output = simple_evaluate(model="headloc", model_args=f"pretrained={tiny_model_dir},heads={heads}",
                                 tasks=["headloc_ioi"], task_manager=manager, batch_size=4, device="cpu",
                                 bootstrap_iters=0, verbosity="WARNING")
        samples = [compact_sample(s, "acc") for s in output["samples"]["headloc_ioi"]]
        return output["results"]["headloc_ioi"]["acc,none"], np.array([[c[0] for c in s["response"]] for s in samples])

    mask = headset_mask(["L0H1", "L1H2"], 2, 4)
    reference = MaskEvaluator(zeroed_copy(model, mask), tokenizer, ioi(ioi_file), batch_size=4).evaluate()
    score, ablated = run("L0H1+L1H2")
    np.testing.assert_allclose(ablated, loglikelihoods(reference), rtol=0, atol=1e-5)
    assert score == reference.score
    _, unablated = run("none")
    assert not np.allclose(ablated, unablated, atol=1e-4), "the heads argument must ablate"


def test_heads_outside_the_model_are_refused(model, tokenizer):
    with pytest.raises(ValueError, match=r"head L2H0 is outside the model: layers 0\.\.1, heads 0\.\.3"):
        AblatedLM(pretrained=model, tokenizer=tokenizer, heads="L0H1+L2H0")


def test_unknown_metric_lists_the_known_ones(model, tokenizer, ioi_file):
    evaluator = MaskEvaluator(model, tokenizer, ioi(ioi_file, metric="f1"), batch_size=4)
    with pytest.raises(ValueError, match=r"no metric 'f1,none'; it reports \['acc,none'"):
        evaluator.evaluate()


def test_chat_task_needs_a_chat_template(model, tokenizer, ioi_file):
    plain = copy.copy(tokenizer)
    plain.chat_template = None
    with pytest.raises(ValueError, match="chat task but the tokenizer .* has no chat template"):
        MaskEvaluator(model, plain, ioi(ioi_file, chat=True))


def test_unknown_task_names_what_exists(model, tokenizer, ioi_file):
    with pytest.raises(ValueError, match="unknown lm-eval task 'headloc_nope': not in .*src/headloc/tasks nor in lm-eval's registry"):
        MaskEvaluator(model, tokenizer, TaskSpec("headloc_nope"))


def test_every_mask_sees_the_same_few_shot_examples(tiny_model_dir, tmp_path):
    """lm-eval draws few-shot examples from one random stream per task; without re-seeding, the
    second evaluation of GSM8K's 5-shot prompt would show other examples than the first."""
    from conftest import SHARED_DATA
    from headloc.model.loading import load_model

    write_jsonl(build_docs("gsm8k", n_docs=2, mirror=SHARED_DATA), tmp_path / "gsm8k.jsonl")
    task = TaskSpec("headloc_gsm8k", metric="exact_match,strict-match",
                    dataset_kwargs={"mirror": str(SHARED_DATA)}).with_data_file(tmp_path / "gsm8k.jsonl")
    model, tokenizer = load_model(str(tiny_model_dir))
    evaluator = MaskEvaluator(model, tokenizer, task, batch_size=4)
    lm_task = evaluator.task_dict["tasks"]["headloc_gsm8k"]
    prompts = []
    for _ in range(2):
        evaluator.evaluate()
        prompts.append([instance.args[0] for instance in lm_task.instances])
    assert prompts[0] == prompts[1]
    assert prompts[0][0].count("Question:") == 6  # five shots and the question
