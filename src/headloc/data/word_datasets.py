"""Built-in datasets of word knowledge that a model of SmolLM2's size mostly gets right, built after
the search defaults were chosen: ``antonyms`` (a word's opposite, curated in ``tasks/data/antonyms.tsv``),
``successor`` (the next item of an ordered list shown four items long: days, months, number words,
letters), ``plural`` (a noun's plural, ``tasks/data/plural.tsv``), ``past_tense`` (a verb's simple
past, ``tasks/data/past_tense.tsv``), ``comparative`` (an adjective's comparative,
``tasks/data/comparative.tsv``) and ``language`` (the language a country speaks,
``tasks/data/language.tsv``), and, held out from every search change since they were built,
``continent`` (the continent a country lies in, ``tasks/data/continent.tsv``) and ``first_letter``
(a word's first letter, ``tasks/data/first_letter.tsv``). Each is the same for every seed;
:func:`headloc.data.datasets.build_docs` serves them.

>>> docs = successor_docs()
>>> docs[0]["text"], docs[0]["answers"], docs[1]["id"]
('Monday, Tuesday, Wednesday, Thursday,', ['Friday'], 'successor-month-00')
>>> next(doc for doc in antonym_docs() if doc["word"] == "cold")["answers"]
['hot', 'warm']
>>> next(doc for doc in plural_docs() if doc["word"] == "child")
{'id': 'plural-child', 'word': 'child', 'plural': 'children', 'answers': ['children']}
"""

from __future__ import annotations

import re

from headloc.data import TASKS_DIR

SHOWN = 4  # items of the list the prompt shows
# name -> (items in order, whether the list wraps round: Sunday is followed by Monday)
ORDERED = {
    "day": (("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"), True),
    "month": (("January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December"), True),
    "number": (("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
                "twenty"), False),
    "letter": (tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), False),
}


def _curated(name: str, field: str, answer: str) -> list[dict]:
    """The documents of ``tasks/data/<name>.tsv`` (``#`` lines are comments): ``field`` (the first
    column), ``answer`` (the second) and ``answers`` (the second, then the other accepted ones)."""
    text = (TASKS_DIR / "data" / f"{name}.tsv").read_text(encoding="utf-8")
    docs = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            word, first, *others = line.split("\t")
            docs.append({"id": f"{name}-{re.sub(r'[^a-z]+', '-', word.lower())}", field: word,
                         answer: first, "answers": [first, *others]})
    return docs


def antonym_docs() -> list[dict]:
    """Word -> opposite; ``answers``: the opposite, then the other accepted ones."""
    return _curated("antonyms", "word", "antonym")


def plural_docs() -> list[dict]:
    """Noun -> plural, regular and irregular; ``answers``: the plural, then the other accepted ones."""
    return _curated("plural", "word", "plural")


def past_tense_docs() -> list[dict]:
    """Verb -> simple past, regular and irregular; ``answers``: the past, then the other accepted ones."""
    return _curated("past_tense", "verb", "past")


def comparative_docs() -> list[dict]:
    """Adjective -> comparative, regular and irregular; ``answers``: the comparative, then the other
    accepted ones."""
    return _curated("comparative", "word", "comparative")


def language_docs() -> list[dict]:
    """Country -> the language most of its people speak; ``answers``: that language, then the other
    accepted ones."""
    return _curated("language", "country", "language")


def continent_docs() -> list[dict]:
    """Country -> the continent it lies in; ``answers``: that continent, then the other accepted ones."""
    return _curated("continent", "country", "continent")


def first_letter_docs() -> list[dict]:
    """Word -> its first letter (lower case)."""
    return _curated("first_letter", "word", "letter")


def successor_docs() -> list[dict]:
    """Every run of :data:`SHOWN` items of every list, then the item after it: a list that wraps
    round starts at each of its items, the others where an item still follows. Ordered by start,
    then list, so that the first documents hold every list."""
    runs = []  # (start, list, document)
    for order, (name, (items, wraps)) in enumerate(ORDERED.items()):
        for start in range(len(items) if wraps else len(items) - SHOWN):
            shown = [items[(start + i) % len(items)] for i in range(SHOWN + 1)]
            runs.append((start, order, {"id": f"successor-{name}-{start:02d}", "text": ", ".join(shown[:-1]) + ",",
                                        "answer": shown[-1], "answers": [shown[-1]]}))
    return [doc for _, _, doc in sorted(runs, key=lambda run: run[:2])]


WORD_DATASETS = {"antonyms": (antonym_docs, False), "successor": (successor_docs, False),  # as datasets._BUILDERS
                 "plural": (plural_docs, False), "past_tense": (past_tense_docs, False),
                 "comparative": (comparative_docs, False), "language": (language_docs, False),
                 "continent": (continent_docs, False), "first_letter": (first_letter_docs, False)}
