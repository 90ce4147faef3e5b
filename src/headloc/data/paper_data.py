"""The paper's benchmark datasets, from the Hugging Face Hub or from an offline mirror.

:func:`load_docs` returns one split of a paper dataset as a list of plain dicts in a normalized
form that is the same whichever source they come from: every document has a stable string
``id`` and the fields the ``headloc_<name>`` task templates read (see
:data:`headloc.data.paper_normalizers.FIELDS`).

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
from pathlib import Path

from headloc.data.paper_normalizers import NORMALIZERS

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
    if name not in NORMALIZERS:
        raise ValueError(f"unknown paper dataset {name!r}: expected one of {', '.join(PAPER_DATASETS)}")
    return NORMALIZERS[name](rows, split)


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
