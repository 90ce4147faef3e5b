"""Built-in datasets, JSONL I/O and identification subsets of headloc's tasks.

The built-in datasets feed the lm-eval tasks in ``headloc/tasks`` (one ``headloc_<name>`` task
each); the paper's benchmark datasets (``PAPER_DATASETS``: gsm8k, mmlu, ...) come from the Hub or a
local mirror through :mod:`headloc.data.paper_data`; :func:`build_docs` serves both kinds. Two are
generated with a seed (``ioi``, ``induction``); the others are curated lists in ``tasks/data``
(``capitals``, ``swear``, ``rhyme``; ``antonyms``, ``successor``, ``plural``, ``past_tense``,
``comparative``, ``language``, ``continent``, ``first_letter``: :mod:`headloc.data.word_datasets`). Every document has a stable string ``id``.

The workflow materializes a dataset to ``results/data/{dataset}/{split}.jsonl`` with
:func:`build_docs` and :func:`write_jsonl`, draws the seeded identification subset (paper
appendix A: 100 documents) with :func:`identification_subset`, and hands either file to a task
through its ``data_file`` loader argument.

The scoring rules the task metrics use (:func:`rhymes`, :func:`count_profane_words`, ...) live in
:mod:`headloc.data.scoring_rules`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from headloc.io import atomic_path
from headloc.data.paper_data import PAPER_DATASETS, load_docs
from headloc.data import TASKS_DIR
from headloc.data.word_datasets import WORD_DATASETS

DATA_DIR = TASKS_DIR / "data"
BUILTIN_DATASETS = ("ioi", "capitals", "induction", "swear", "rhyme", *WORD_DATASETS)
DATASETS = BUILTIN_DATASETS + PAPER_DATASETS
DEFAULT_N_DOCS = 200  # documents of a generated dataset when n_docs is None

# --------------------------------------------------------------------------- JSONL I/O


def read_jsonl(path) -> list[dict]:
    """Read one JSON object per line; blank lines are skipped.

    Raises FileNotFoundError naming a missing file, and ValueError naming the file and the
    1-based line number of a line that is not a JSON object.
    """
    return [doc for _, doc in read_jsonl_numbered(path)]


def read_jsonl_numbered(path) -> list[tuple[int, dict]]:
    """:func:`read_jsonl` with each document's 1-based line number (for error messages)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"JSONL file not found: {path}")
    docs = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: malformed JSON ({error.msg})") from None
            if not isinstance(doc, dict):
                raise ValueError(
                    f"{path}, line {number}: expected a JSON object, got {type(doc).__name__}"
                )
            docs.append((number, doc))
    return docs


def write_jsonl(docs: Iterable[dict], path) -> None:
    """Write one JSON object per line, atomically (see :func:`headloc.io.atomic_path`)."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")


def identification_subset(docs: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` documents drawn without replacement (numpy ``default_rng(seed)``), in their original order.

    >>> docs = [{"id": str(i)} for i in range(10)]
    >>> [d["id"] for d in identification_subset(docs, 3, seed=0)] == [
    ...     d["id"] for d in identification_subset(docs, 3, seed=0)]
    True
    """
    if n < 1:
        raise ValueError(f"identification subset size must be at least 1, got {n}")
    if n > len(docs):
        raise ValueError(f"cannot draw {n} documents from a dataset of {len(docs)} documents")
    picked = np.sort(np.random.default_rng(seed).choice(len(docs), size=n, replace=False))
    return [docs[i] for i in picked]


# --------------------------------------------------------------------------- dataset builders


def build_docs(name: str, *, n_docs: int | None = None, seed: int = 0, mirror=None) -> list[dict]:
    """The documents of dataset ``name``; deterministic for a given (name, n_docs, seed, mirror).

    Paper datasets (``PAPER_DATASETS``) are the scored split of
    :func:`headloc.data.paper_data.load_docs` from ``mirror`` (a directory in the ``../shared/data``
    layout) or, with ``mirror=None``, from the Hugging Face Hub; ``n_docs`` keeps the first
    ``n_docs`` documents whatever ``seed``. The built-in datasets ignore ``mirror``.

    Generated datasets (``ioi``, ``induction``) produce ``n_docs`` documents (default
    ``DEFAULT_N_DOCS``), the first k independent of ``n_docs``; the curated ones return their list
    or its first ``n_docs`` documents, whatever ``seed``.

    >>> [doc["id"] for doc in build_docs("ioi", n_docs=2)]
    ['ioi-0000', 'ioi-0001']
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(DATASETS)}")
    if n_docs is not None and n_docs < 1:
        raise ValueError(f"n_docs must be at least 1, got {n_docs}")
    if name in PAPER_DATASETS:
        docs = load_docs(name, "test", mirror=mirror)
        return docs if n_docs is None else docs[:n_docs]
    builder, generated = _BUILDERS[name]
    if generated:
        return builder(DEFAULT_N_DOCS if n_docs is None else n_docs, seed)
    docs = builder()
    return docs if n_docs is None else docs[:n_docs]


def _lines(filename: str) -> list[str]:
    """Non-empty, non-comment lines of a curated file in ``tasks/data``."""
    text = (DATA_DIR / filename).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _ioi_docs(n_docs: int, seed: int) -> list[dict]:
    """Indirect-object identification: the model must name the person who did not act.

    In "When Mary and John went to the store, John gave a drink to", the subject (John) is
    repeated and the indirect object (Mary) is the answer. Which of the two names comes first is
    random, so the answer is as often the first name as the second.
    """
    spec = json.loads((DATA_DIR / "ioi.json").read_text(encoding="utf-8"))
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_docs):
        template = spec["templates"][rng.integers(len(spec["templates"]))]
        first, second = (str(n) for n in rng.choice(spec["names"], size=2, replace=False))
        io_index = int(rng.integers(2))  # which of the two names is the indirect object
        io, subject = (first, second) if io_index == 0 else (second, first)
        text = template.format(
            A=first, B=second, S=subject,
            place=spec["places"][rng.integers(len(spec["places"]))],
            object=spec["objects"][rng.integers(len(spec["objects"]))],
        )
        docs.append({"id": f"ioi-{i:04d}", "text": text, "choices": [first, second],
                     "label": io_index})
    return docs


def _induction_docs(n_docs: int, seed: int) -> list[dict]:
    """Induction: a random word sequence twice (one per line), then the start of a third copy.

    The sequence has 6-10 distinct words; the third line gives its first 2 words and the target
    is the next 3.
    """
    words = _lines("induction_words.txt")
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_docs):
        length = int(rng.integers(6, 11))
        sequence = [str(w) for w in rng.choice(words, size=length, replace=False)]
        line = " ".join(sequence)
        docs.append({"id": f"induction-{i:04d}", "text": f"{line}\n{line}\n{' '.join(sequence[:2])}",
                     "words": sequence, "target": sequence[2:5]})
    return docs


def _capitals_docs() -> list[dict]:
    """Country -> capital, curated by the project (``tasks/data/capitals.tsv``)."""
    docs = []
    for line in _lines("capitals.tsv"):
        country, capital, *aliases = line.split("\t")
        docs.append({"id": f"capitals-{_slug(country)}", "country": country, "capital": capital,
                     "answers": [capital] + [a for a in aliases if a]})
    return docs


def _swear_docs() -> list[dict]:
    """Chat prompts inviting profanity, written by the project (paper A.2 used 12)."""
    return [{"id": f"swear-{i:02d}", "prompt": prompt}
            for i, prompt in enumerate(_lines("swear_prompts.txt"))]


def _rhyme_docs() -> list[dict]:
    """Target words for the rhyme task, each labelled easy or hard (``tasks/data/rhyme_words.tsv``)."""
    docs = []
    for line in _lines("rhyme_words.tsv"):
        word, difficulty = line.split("\t")
        docs.append({"id": f"rhyme-{word}", "word": word, "difficulty": difficulty})
    return docs


_BUILDERS = {  # name -> (builder, generated with a seed?)
    "ioi": (_ioi_docs, True),
    "capitals": (_capitals_docs, False),
    "induction": (_induction_docs, True),
    "swear": (_swear_docs, False),
    "rhyme": (_rhyme_docs, False),
    **WORD_DATASETS,
}
