"""How each paper dataset's raw rows, in the hub's format or the mirror's, become headloc's
normalized documents: a stable string ``id`` and the fields of ``FIELDS``, the same from either
source (:func:`headloc.data.paper_data.normalize` picks the normalizer of a dataset).

Apart from :mod:`headloc.data.paper_data` (where a dataset comes from and how its rows are read):
the normalizers alone decide what a paper dataset's documents hold, one dataset each, whichever the
source.
"""

from __future__ import annotations

import re

# The fields of a normalized document (besides ``id``).
FIELDS = {
    "gsm8k": ("question", "answer"),
    "arithmetic": ("subset", "context", "completion"),
    "mbpp": ("task_id", "text", "code", "test_list", "test_setup_code", "challenge_test_list"),
    "humaneval": ("task_id", "prompt", "canonical_solution", "test", "entry_point"),
    "hellaswag": ("activity_label", "query", "choices", "label"),
    "boolq": ("question", "passage", "label"),
    "arc_challenge": ("arc_id", "question", "choices", "answerKey"),
    "mmlu": ("subject", "question", "choices", "answer"),
    "wmdp_bio": ("question", "choices", "answer"),
    "wmdp_chem": ("question", "choices", "answer"),
    "wmdp_cyber": ("question", "choices", "answer"),
}


def _gsm8k(rows, split):
    prefix = "gsm8k" if split == "test" else f"gsm8k_{split}"
    return [{"id": f"{prefix}-{i:04d}", "question": r["question"], "answer": r["answer"]}
            for i, r in enumerate(rows)]


def _arithmetic(rows, split):
    """The HF loading script's (and lm-eval's ``process_docs``) normalization of the GPT-3 files."""
    docs, counts = [], {}
    for row in rows:
        subset = row["subset"]
        index = counts[subset] = counts.get(subset, -1) + 1
        context = (row["context"].strip().replace("\n\n", "\n")
                   .replace("Q:", "Question:").replace("A:", "Answer:"))
        docs.append({"id": f"arithmetic-{subset}-{index:04d}", "subset": subset,
                     "context": context, "completion": row["completion"]})
    return docs


def _mbpp(rows, split):
    return [{"id": f"mbpp-{int(r['task_id']):04d}", "task_id": int(r["task_id"]), "text": r["text"],
             "code": r["code"], "test_list": list(r["test_list"]),
             "test_setup_code": r["test_setup_code"],
             "challenge_test_list": list(r["challenge_test_list"])} for r in rows]


def _humaneval(rows, split):
    return [{"id": f"humaneval-{int(r['task_id'].split('/')[1]):03d}", "task_id": r["task_id"],
             "prompt": r["prompt"], "canonical_solution": r["canonical_solution"],
             "test": r["test"], "entry_point": r["entry_point"]} for r in rows]


def hellaswag_preprocess(text: str) -> str:
    """lm-eval's HellaSwag text clean-up (``lm_eval/tasks/hellaswag/utils.py``)."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


def _hellaswag(rows, split):
    docs = []
    for i, r in enumerate(rows):
        if "ctx_a" in r:  # the hub's rows: exactly lm-eval's process_docs
            ctx = r["ctx_a"] + " " + r["ctx_b"].capitalize()
        else:  # the offline copy: ctx = ctx_a + " " + ctx_b, ctx_b not capitalized (lossy)
            ctx = r["ctx"]
        index = int(r.get("index", i))
        docs.append({"id": f"hellaswag-{index:05d}", "activity_label": r["activity_label"],
                     "query": hellaswag_preprocess(r["activity_label"] + ": " + ctx),
                     "choices": [hellaswag_preprocess(e) for e in r["endings"]],
                     "label": int(r["label"])})
    return docs


def _boolq(rows, split):
    return [{"id": f"boolq-{i:04d}", "question": r["question"], "passage": r["passage"],
             "label": int(r["label"])} for i, r in enumerate(rows)]


def _arc(rows, split):
    docs = []
    for r in rows:
        if isinstance(r["question"], dict):  # the original AI2 release format (offline copy)
            question = r["question"]["stem"]
            choices = {"text": [c["text"] for c in r["question"]["choices"]],
                       "label": [c["label"] for c in r["question"]["choices"]]}
        else:  # the hub's format
            question = r["question"]
            choices = {"text": list(r["choices"]["text"]), "label": list(r["choices"]["label"])}
        prefix = "arc_challenge" if split == "test" else f"arc_challenge_{split}"
        docs.append({"id": f"{prefix}-{r['id']}", "arc_id": r["id"], "question": question,
                     "choices": choices, "answerKey": r["answerKey"]})
    return docs


def _mmlu(rows, split):
    docs, counts = [], {}
    prefix = "mmlu" if split == "test" else f"mmlu_{split}"
    for r in rows:
        index = counts[r["subject"]] = counts.get(r["subject"], -1) + 1
        docs.append({"id": f"{prefix}-{r['subject']}-{index:04d}", "subject": r["subject"],
                     "question": r["question"], "choices": list(r["choices"]),
                     "answer": int(r["answer"])})
    return docs


def _wmdp(name):
    def normalize(rows, split):
        return [{"id": f"{name}-{i:04d}", "question": r["question"], "choices": list(r["choices"]),
                 "answer": int(r["answer"])} for i, r in enumerate(rows)]
    return normalize


NORMALIZERS = {
    "gsm8k": _gsm8k, "arithmetic": _arithmetic, "mbpp": _mbpp, "humaneval": _humaneval,
    "hellaswag": _hellaswag, "boolq": _boolq, "arc_challenge": _arc, "mmlu": _mmlu,
    "wmdp_bio": _wmdp("wmdp_bio"), "wmdp_chem": _wmdp("wmdp_chem"), "wmdp_cyber": _wmdp("wmdp_cyber"),
}
