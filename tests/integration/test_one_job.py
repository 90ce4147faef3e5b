"""The job rule search_job's script builds (headloc.workflow.jobs.one_job), on a tiny random model:
a kind that scores masks scores them on the search's scoring task (ioi's margin), a kind that
differentiates takes the gold continuations of the task itself (ioi), each read from the rule's
params by role."""

import logging
from dataclasses import dataclass

import numpy as np
import pytest
from transformers import AutoModelForCausalLM

from headloc import methods
from headloc.data.datasets import build_docs, write_jsonl
from headloc.engine.evaluation import MaskEvaluator
from headloc.engine.lm_eval_tasks import TaskSpec
from headloc.engine.supervision import task_examples
from headloc.workflow.jobs import one_job

LOG = logging.getLogger("test_one_job")
MODEL = {"dtype": "float32", "device": "cpu", "batch_size": 4, "masks_per_pass": 1}
TASKS = {"scoring": {"lm_eval_task": "headloc_ioi_margin", "metric": "margin", "chat": False, "dataset_kwargs": {}},
         "gold": {"lm_eval_task": "headloc_ioi", "metric": "acc", "chat": False, "dataset_kwargs": {}}}


@dataclass(frozen=True)
class Params:
    """What rule search_job hands its script (Snakemake's params, by name)."""

    location: str
    tasks: dict
    step: dict
    model: dict
    task_digest: str = "d"


def test_the_job_scores_the_scoring_task_and_differentiates_the_gold_task(tiny_model_dir, tokenizer, tmp_path):
    docs = tmp_path / "docs.jsonl"
    write_jsonl(build_docs("ioi", n_docs=4, seed=0), docs)
    params = Params(str(tiny_model_dir), TASKS, {"method": "guided_greedy", "higher_is_better": True}, MODEL)
    job = one_job(methods.get("guided_greedy").kind, params, str(tmp_path / "search"), str(docs), [str(docs)], {}, LOG)

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    margin = MaskEvaluator(model, tokenizer, TaskSpec("headloc_ioi_margin", metric="margin").with_documents(str(docs)),
                           batch_size=4)
    mask = np.zeros((1, job.geometry.total), dtype=np.int8)
    assert job.score(mask).scores[0] == pytest.approx(margin.evaluate_mask(mask[0]).score, abs=1e-5)
    gold = task_examples(tokenizer, TaskSpec("headloc_ioi").with_documents(str(docs)))
    _, examples = job.gradient
    assert [(e.context, e.target) for e in examples] == [(e.context, e.target) for e in gold]
    assert job.batch_size == 4 and str(docs) in job.key and job.files.record() == f"{tmp_path}/search/record.npz"
