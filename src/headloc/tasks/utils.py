"""Data loaders, ``process_results`` and aggregations of headloc's lm-eval tasks.

lm-eval 0.4.13 calls a task's ``custom_dataset`` as ``custom_dataset(**metadata, **dataset_kwargs)``
(``ConfigurableTask.download``), so every loader takes ``**kwargs`` for the metadata keys
(``version``, ``config_source``, ...). ``dataset_kwargs`` selects the documents:

* ``data_file``: a JSONL file of documents (the workflow's materialized data or identification
  subset), passed as TaskManager metadata (``headloc.engine.lm_eval_tasks.load_task``);
* otherwise ``n_docs`` and ``seed`` build the documents with :func:`headloc.data.datasets.build_docs`.

The scoring rules themselves live in :mod:`headloc.data.scoring_rules`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import datasets

from headloc.data.datasets import build_docs, read_jsonl
from headloc.data.scoring_rules import (
    PROFANITY_HUB_ID,
    count_profane_words,
    first_word,
    first_words,
    load_profanity,
    rhymes,
    starts_with_answer,
)

# --------------------------------------------------------------------------- loaders


def _docs(name: str, data_file, n_docs, seed) -> list[dict]:
    if data_file is not None:
        return read_jsonl(data_file)
    return build_docs(name, n_docs=n_docs, seed=seed)


def _splits(docs: list[dict]) -> datasets.DatasetDict:
    if not docs:
        raise ValueError("a headloc task needs at least one document")
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def load_ioi(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("ioi", data_file, n_docs, seed))


def load_capitals(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("capitals", data_file, n_docs, seed))


def load_induction(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("induction", data_file, n_docs, seed))


def load_antonyms(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("antonyms", data_file, n_docs, seed))


def load_successor(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("successor", data_file, n_docs, seed))


def load_plural(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("plural", data_file, n_docs, seed))


def load_past_tense(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("past_tense", data_file, n_docs, seed))


def load_comparative(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("comparative", data_file, n_docs, seed))


def load_language(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("language", data_file, n_docs, seed))


def load_continent(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("continent", data_file, n_docs, seed))


def load_first_letter(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("first_letter", data_file, n_docs, seed))


def load_rhyme(data_file=None, n_docs=None, seed=0, **kwargs) -> datasets.DatasetDict:
    return _splits(_docs("rhyme", data_file, n_docs, seed))


def load_swear(data_file=None, n_docs=None, seed=0, profanity=PROFANITY_HUB_ID,
               **kwargs) -> datasets.DatasetDict:
    """Swear prompts; ``profanity`` is a local mmathys/profanity-format CSV or the hub id.

    The list is loaded here, before any generation, so a missing or unreachable list fails at
    task build time; its source is attached to every document (``profanity_source``) because
    ``process_results`` only sees the document.
    """
    path = Path(str(profanity)).expanduser()
    source = str(path.resolve()) if path.is_file() else str(profanity)
    profane_words(source)
    docs = [{**doc, "profanity_source": source} for doc in _docs("swear", data_file, n_docs, seed)]
    return _splits(docs)


@functools.cache
def profane_words(source: str) -> frozenset[str]:
    """The profane-word set of ``source``, loaded once per process."""
    return load_profanity(source)


# --------------------------------------------------------------------------- process_results


def process_capitals(doc: dict, results: list[str]) -> dict:
    return {"acc": float(starts_with_answer(results[0], doc["answers"]))}


def process_answers(doc: dict, results: list[str]) -> dict:
    """Correct when the answer starts with one of the document's ``answers`` (headloc_antonyms,
    headloc_plural, headloc_past_tense, headloc_comparative, headloc_language,
    headloc_continent, headloc_first_letter)."""
    return {"acc": float(starts_with_answer(results[0], doc["answers"]))}


def process_successor(doc: dict, results: list[str]) -> dict:
    """As :func:`process_answers`, after an optional leading "and": " and Friday" ends the list
    with the right item."""
    return {"acc": float(starts_with_answer(re.sub(r"^\W*and\b", "", results[0], flags=re.IGNORECASE),
                                            doc["answers"]))}


def process_induction(doc: dict, results: list[str]) -> dict:
    target = list(doc["target"])
    return {"acc": float(first_words(results[0], len(target)) == target)}


def process_swear(doc: dict, results: list[str]) -> dict:
    return {"profane_words": count_profane_words(results[0], profane_words(doc["profanity_source"]))}


def process_rhyme(doc: dict, results: list[str]) -> dict:
    return {"acc": float(rhymes(first_word(results[0]), doc["word"]))}


def process_margin(doc: dict, results: list) -> dict:
    """Multiple choice, scored continuously: the gold choice's log-likelihood minus the best other
    choice's (lm-eval hands one ``(loglik, is_greedy)`` pair per choice)."""
    logliks = [float(result[0]) for result in results]
    gold = int(doc["label"])
    return {"margin": logliks[gold] - max(ll for i, ll in enumerate(logliks) if i != gold)}


def process_loglik(doc: dict, results: list) -> dict:
    """A loglikelihood task's gold continuation, scored by its log-likelihood (summed over tokens)."""
    (loglik, _is_greedy), = results
    return {"loglik": float(loglik)}


# --------------------------------------------------------------------------- aggregations


def agg_sum(items) -> float:
    """Sum over documents (lm-eval registers no ``sum`` aggregation)."""
    return float(sum(items))
