"""The paper's benchmark datasets, from the Hugging Face Hub or from an offline mirror.

:func:`load_docs` returns one split of a paper dataset as a list of plain dicts in a normalized
form that is the same whichever source they come from: every document has a stable string
``id`` and the fields the ``headloc_<name>`` task templates read (see ``FIELDS``).

Sources
-------
``mirror=None``
    the Hugging Face Hub (``datasets.load_dataset`` with the ids in ``HUB``; needs internet).
``mirror=DIR``
    a local directory laid out like ``../shared/data`` (see its SOURCES.md): ``gsm8k/test.jsonl``,
    ``mmlu/test.jsonl.gz``, ... (``MIRROR_FILES``).

Splits
------
``split="test"`` is always the split a task is scored on, whatever the dataset calls it
(HellaSwag, BoolQ and Arithmetic are scored on their validation split, as lm-eval does). The
other split names are the few-shot pools the tasks use: gsm8k ``train``, arc_challenge
``train``, mmlu ``dev``.

Deliberate differences between the two sources: the offline HellaSwag copy is preprocessed and
lacks the ``ctx_a``/``ctx_b`` split, so the first letter of ``ctx_b`` is not capitalized as
lm-eval does (``query`` differs from the hub's in those documents; see tasks/README.md).

>>> sorted(SPLITS["mmlu"])
['dev', 'test']
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

PAPER_DATASETS = (
    "gsm8k", "arithmetic", "mbpp", "humaneval", "hellaswag", "boolq", "arc_challenge", "mmlu",
    "wmdp_bio", "wmdp_chem", "wmdp_cyber",
)

# Arithmetic subsets in lm-eval's order -> file name in EleutherAI/arithmetic and openai/gpt-3.
ARITHMETIC_SUBSETS = {
    "1dc": "single_digit_three_ops", "2da": "two_digit_addition", "2dm": "two_digit_multiplication",
    "2ds": "two_digit_subtraction", "3da": "three_digit_addition", "3ds": "three_digit_subtraction",
    "4da": "four_digit_addition", "4ds": "four_digit_subtraction", "5da": "five_digit_addition",
    "5ds": "five_digit_subtraction",
}

# (hub path, hub config, {headloc split: hub split})
HUB = {
    "gsm8k": ("openai/gsm8k", "main", {"test": "test", "train": "train"}),
    "arithmetic": ("EleutherAI/arithmetic", None, {"test": "validation"}),
    "mbpp": ("google-research-datasets/mbpp", "full", {"test": "test"}),
    "humaneval": ("openai/openai_humaneval", None, {"test": "test"}),
    "hellaswag": ("Rowan/hellaswag", None, {"test": "validation"}),
    "boolq": ("aps/super_glue", "boolq", {"test": "validation"}),
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", {"test": "test", "train": "train"}),
    "mmlu": ("cais/mmlu", "all", {"test": "test", "dev": "dev"}),
    "wmdp_bio": ("cais/wmdp", "wmdp-bio", {"test": "test"}),
    "wmdp_chem": ("cais/wmdp", "wmdp-chem", {"test": "test"}),
    "wmdp_cyber": ("cais/wmdp", "wmdp-cyber", {"test": "test"}),
}
SPLITS = {name: tuple(hub[2]) for name, hub in HUB.items()}

# headloc split -> file(s) under the mirror directory (arithmetic: one file per subset).
MIRROR_FILES = {
    "gsm8k": {"test": "gsm8k/test.jsonl", "train": "gsm8k/train.jsonl.gz"},
    "arithmetic": {"test": "arithmetic/raw_gpt3/{file}.jsonl.gz"},
    "mbpp": {"test": "mbpp/test.jsonl"},
    "humaneval": {"test": "humaneval/HumanEval.jsonl.gz"},
    "hellaswag": {"test": "hellaswag/validation.klosax_preprocessed.jsonl.gz"},
    "boolq": {"test": "boolq/val.jsonl.gz"},
    "arc_challenge": {"test": "arc_challenge/ARC-Challenge-Test.jsonl",
                      "train": "arc_challenge/ARC-Challenge-Train.jsonl"},
    "mmlu": {"test": "mmlu/test.jsonl.gz", "dev": "mmlu/dev.jsonl.gz"},
    "wmdp_bio": {"test": "wmdp/wmdp-bio.test.jsonl.gz"},
    "wmdp_chem": {"test": "wmdp/wmdp-chem.test.jsonl.gz"},
    "wmdp_cyber": {"test": "wmdp/wmdp-cyber.test.jsonl.gz"},
}

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


def load_docs(name: str, split: str = "test", mirror=None) -> list[dict]:
    """The documents of one split of paper dataset ``name``, normalized (see the module docstring).

    Parameters
    ----------
    name : one of ``PAPER_DATASETS``.
    split : ``"test"`` (the scored split) or a few-shot split listed in ``SPLITS[name]``.
    mirror : a directory in the ``../shared/data`` layout, or None for the Hugging Face Hub.

    Raises ValueError for an unknown name or split and FileNotFoundError naming the mirror
    file that is missing.
    """
    if name not in HUB:
        raise ValueError(f"unknown paper dataset {name!r}: expected one of {', '.join(PAPER_DATASETS)}")
    if split not in SPLITS[name]:
        raise ValueError(f"dataset {name!r} has no split {split!r}: expected one of {', '.join(SPLITS[name])}")
    if name == "arithmetic":
        rows = _arithmetic_rows(mirror)
    elif mirror is None:
        rows = _hub_rows(name, split)
    else:
        rows = _read_mirror_file(_mirror_path(mirror, MIRROR_FILES[name][split]))
    return normalize(name, rows, split)


def mirror_files(name: str, mirror) -> list[Path]:
    """The files of ``mirror`` that dataset ``name`` reads, every split (the workflow hashes them into
    the task's digest, so an edited mirror re-runs what used it); [] without a mirror or for a dataset
    with none.

    >>> [p.name for p in mirror_files("gsm8k", None)]
    []
    """
    if mirror is None or name not in MIRROR_FILES:
        return []
    root = Path(mirror).expanduser()
    subsets = ARITHMETIC_SUBSETS.values() if name == "arithmetic" else [None]
    relative = [pattern.format(file=file) for pattern in MIRROR_FILES[name].values() for file in subsets]
    return [root / path for path in dict.fromkeys(relative) if (root / path).is_file()]


def normalize(name: str, rows: list[dict], split: str = "test") -> list[dict]:
    """Raw rows of ``name`` (hub or mirror format) in headloc's normalized form, with ids.

    Arithmetic rows must carry their ``subset``; the rows are taken in order.
    """
    if name not in _NORMALIZERS:
        raise ValueError(f"unknown paper dataset {name!r}: expected one of {', '.join(PAPER_DATASETS)}")
    return _NORMALIZERS[name](rows, split)


# --------------------------------------------------------------------------- raw rows


def _mirror_path(mirror, relative: str) -> Path:
    root = Path(mirror).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"data mirror {root} is not a directory (expected the ../shared/data layout, "
            f"see its SOURCES.md)"
        )
    path = root / relative
    if not path.is_file():
        raise FileNotFoundError(f"data mirror {root} lacks {relative}: expected file {path}")
    return path


def _read_mirror_file(path: Path) -> list[dict]:
    """JSONL, gzipped or not. Lines are split on ``\\n`` only (MMLU has U+2028 inside strings)."""
    raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    rows = []
    for number, line in enumerate(raw.decode("utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: malformed JSON ({error.msg})") from None
    return rows


def _hub_rows(name: str, split: str) -> list[dict]:
    import datasets

    path, config, splits = HUB[name]
    try:
        table = datasets.load_dataset(path, config, split=splits[split])
    except Exception as error:  # offline, hub down, gated, ...
        raise RuntimeError(
            f"could not load {path} ({config or 'default'}, split {splits[split]}) from the "
            f"Hugging Face Hub ({type(error).__name__}: {error}). Offline, give a local mirror "
            "instead (config data.mirror; the ../shared/data layout)"
        ) from error
    return [dict(row) for row in table]


def _arithmetic_rows(mirror) -> list[dict]:
    """All 10 subsets, in ``ARITHMETIC_SUBSETS`` order, each row tagged with its ``subset``."""
    rows = []
    for subset, file in ARITHMETIC_SUBSETS.items():
        if mirror is None:
            import datasets

            url = f"hf://datasets/EleutherAI/arithmetic/data/{file}.jsonl"
            try:
                part = [dict(r) for r in datasets.load_dataset("json", data_files=url, split="train")]
            except Exception as error:
                raise RuntimeError(
                    f"could not load {url} ({type(error).__name__}: {error}). Offline, give a "
                    "local mirror instead (config data.mirror; the ../shared/data layout)"
                ) from error
        else:
            relative = MIRROR_FILES["arithmetic"]["test"].format(file=file)
            part = _read_mirror_file(_mirror_path(mirror, relative))
        rows.extend({**row, "subset": subset} for row in part)
    return rows


# --------------------------------------------------------------------------- normalizers


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


_NORMALIZERS = {
    "gsm8k": _gsm8k, "arithmetic": _arithmetic, "mbpp": _mbpp, "humaneval": _humaneval,
    "hellaswag": _hellaswag, "boolq": _boolq, "arc_challenge": _arc, "mmlu": _mmlu,
    "wmdp_bio": _wmdp("wmdp_bio"), "wmdp_chem": _wmdp("wmdp_chem"), "wmdp_cyber": _wmdp("wmdp_cyber"),
}
