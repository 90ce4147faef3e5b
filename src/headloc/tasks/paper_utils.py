"""Loaders, samplers, filters and scoring of the paper's benchmark tasks (``headloc_<dataset>``).

Each task copies the prompt, few-shot setting, filters and metric of lm-eval's built-in task
(0.4.13) and reads its documents from :mod:`headloc.data.paper_data`, so it runs from the Hugging Face
Hub or offline from a local mirror. lm-eval calls ``custom_dataset(**metadata, **dataset_kwargs)``;
the loaders take:

* ``data_file``: the scored documents from this JSONL file (the workflow's materialized dataset
  or identification subset); otherwise the whole scored split (``n_docs``: its first documents);
* ``mirror``: a directory in the ``../shared/data`` layout, or None for the hub. The few-shot
  pools (gsm8k train, arc_challenge train, mmlu dev) always come from here;
* ``allow_code_execution`` (mbpp, humaneval): must be True, or the loader refuses to build a task
  that executes model-written code.

Model-written programs run through :func:`headloc.data.sandbox.run_program` (a subprocess with a time
limit, in a temporary directory, without secrets in its environment); pass@1 is computed here,
not with ``evaluate.load("code_eval")`` as the built-ins do (that needs the network).
"""

from __future__ import annotations

import datasets
from lm_eval.api.samplers import FirstNSampler

from headloc.data.datasets import build_docs, read_jsonl
from headloc.data.paper_data import load_docs

CODE_TIMEOUT = 10.0  # seconds per program, interpreter start included

# --------------------------------------------------------------------------- loaders


def _test_docs(name: str, data_file, n_docs, mirror) -> list[dict]:
    docs = read_jsonl(data_file) if data_file is not None else build_docs(name, n_docs=n_docs, mirror=mirror)
    if not docs:
        raise ValueError(f"a headloc_{name} task needs at least one document (data_file={data_file})")
    return docs


def _splits(name: str, data_file, n_docs, mirror, fewshot: tuple[str, ...] = ()) -> datasets.DatasetDict:
    splits = {"test": datasets.Dataset.from_list(_test_docs(name, data_file, n_docs, mirror))}
    for split in fewshot:
        splits[split] = datasets.Dataset.from_list(load_docs(name, split, mirror=mirror))
    return datasets.DatasetDict(splits)


def _require_code_execution(name: str, allow_code_execution) -> None:
    if allow_code_execution is not True:
        raise ValueError(
            f"task headloc_{name} executes model-written code, which is off "
            f"(allow_code_execution={allow_code_execution!r}). To opt in, set "
            "`data.allow_code_execution: true` in the workflow config (lm-eval: pass "
            "allow_code_execution=True in the task metadata or dataset_kwargs). Each program then "
            "runs through headloc.data.sandbox.run_program: a subprocess with a time limit, in a "
            "temporary directory, with an environment that carries no secrets."
        )


def load_gsm8k(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("gsm8k", data_file, n_docs, mirror, fewshot=("train",))


def load_arithmetic(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("arithmetic", data_file, n_docs, mirror)


def load_mbpp(data_file=None, n_docs=None, seed=0, mirror=None, allow_code_execution=False, **kwargs):
    _require_code_execution("mbpp", allow_code_execution)
    return _splits("mbpp", data_file, n_docs, mirror)


def load_humaneval(data_file=None, n_docs=None, seed=0, mirror=None, allow_code_execution=False,
                   **kwargs):
    _require_code_execution("humaneval", allow_code_execution)
    return _splits("humaneval", data_file, n_docs, mirror)


def load_hellaswag(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("hellaswag", data_file, n_docs, mirror)


def load_boolq(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("boolq", data_file, n_docs, mirror)


def load_arc_challenge(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("arc_challenge", data_file, n_docs, mirror, fewshot=("train",))


def load_mmlu(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("mmlu", data_file, n_docs, mirror, fewshot=("dev",))


def load_wmdp_bio(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("wmdp_bio", data_file, n_docs, mirror)


def load_wmdp_chem(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("wmdp_chem", data_file, n_docs, mirror)


def load_wmdp_cyber(data_file=None, n_docs=None, seed=0, mirror=None, **kwargs):
    return _splits("wmdp_cyber", data_file, n_docs, mirror)


# --------------------------------------------------------------------------- few-shot


class SubjectFirstNSampler(FirstNSampler):
    """MMLU as one task: few-shot examples must come from the question's own subject.

    lm-eval's per-subject MMLU tasks take the first n dev questions of their subject. lm-eval
    0.4.13 hands the sampler the evaluated document only when the few-shot split is the test
    split, so within one task over all subjects the subject is unknown here: headloc_mmlu is
    zero-shot (lm-eval's default for mmlu) and refuses ``num_fewshot > 0`` rather than mix
    subjects.
    """

    def sample(self, n: int, eval_doc=None, df=None, **kwargs):
        if n > 0 and eval_doc is None:
            raise ValueError(
                f"headloc_mmlu is zero-shot only (num_fewshot={n} requested): lm-eval 0.4.13 does "
                "not tell the sampler which subject a question has, and the built-in mmlu tasks "
                "take few-shot examples from the question's own subject. Use num_fewshot: 0."
            )
        if n > 0:
            pool = [d for d in self.df if d["subject"] == eval_doc["subject"]]
            return pool[:n]
        return []


def mbpp_fewshot_samples() -> list[dict]:
    """lm-eval's fixed 3-shot MBPP examples (``lm_eval/tasks/mbpp/utils.py``), copied verbatim."""
    return [
        {
            "task_id": 2,
            "text": "Write a function to find the similar elements from the given two tuple lists.",
            "code": "def similar_elements(test_tup1, test_tup2):\r\n  res = tuple(set(test_tup1) & set(test_tup2))\r\n  return (res) ",
            "test_list": [
                "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
                "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)",
                "assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)",
            ],
            "is_fewshot": True,
        },
        {
            "task_id": 3,
            "text": "Write a python function to identify non-prime numbers.",
            "code": "import math\r\ndef is_not_prime(n):\r\n    result = False\r\n    for i in range(2,int(math.sqrt(n)) + 1):\r\n        if n % i == 0:\r\n            result = True\r\n    return result",
            "test_list": [
                "assert is_not_prime(2) == False",
                "assert is_not_prime(10) == True",
                "assert is_not_prime(35) == True",
            ],
            "is_fewshot": True,
        },
        {
            "task_id": 4,
            "text": "Write a function to find the largest integers from a given list of numbers using heap queue algorithm.",
            "code": "import heapq as hq\r\ndef heap_queue_largest(nums,n):\r\n  largest_nums = hq.nlargest(n, nums)\r\n  return largest_nums",
            "test_list": [
                "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65] ",
                "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],2)==[85, 75] ",
                "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],5)==[85, 75, 65, 58, 35]",
            ],
            "is_fewshot": True,
        },
    ]


# --------------------------------------------------------------------------- code scoring


def build_predictions_instruct(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """lm-eval's humaneval_instruct filter: the prompt plus the response up to its closing fence."""
    return [
        [doc["prompt"] + (r if r.find("```") == -1 else r[: r.find("```")]) for r in resp]
        for resp, doc in zip(resps, docs)
    ]


def mbpp_program(doc: dict, completion: str) -> str:
    """What lm-eval's mbpp runs: the completion, then the three asserts of its target."""
    return completion + "\n" + "\n".join(doc["test_list"][:3])


def humaneval_program(doc: dict, prediction: str) -> str:
    """What lm-eval's humaneval runs: the prediction, the test code, ``check(entry_point)``."""
    return prediction + "\n" + doc["test"] + "\ncheck(" + doc["entry_point"] + ")"


def passes(program: str) -> bool:
    """True iff ``program`` exits 0 within ``CODE_TIMEOUT`` in headloc's sandbox."""
    from headloc.data.sandbox import run_program

    return bool(run_program(program, timeout=CODE_TIMEOUT).passed)


def _first(results):
    result = results[0]
    return result[0] if isinstance(result, (list, tuple)) else result


def process_mbpp(doc: dict, results) -> dict:
    """pass@1 of greedy decoding: 1.0 when the one generated program passes the tests."""
    return {"pass_at_1": float(passes(mbpp_program(doc, _first(results))))}


def process_humaneval(doc: dict, results) -> dict:
    """pass@1 of greedy decoding on the ``create_test`` filter's prediction."""
    return {"pass_at_1": float(passes(humaneval_program(doc, _first(results))))}
