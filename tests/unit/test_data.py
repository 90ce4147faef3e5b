"""headloc.data.datasets: dataset builders, JSONL I/O, identification subsets; and the scoring rules
(headloc.data.scoring_rules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from headloc.data.datasets import (
    BUILTIN_DATASETS,
    DATASETS,
    DEFAULT_N_DOCS,
    build_docs,
    identification_subset,
    read_jsonl,
    write_jsonl,
)
from headloc.data.scoring_rules import (
    count_profane_words,
    first_word,
    load_profanity,
    response_words,
    rhymes,
    starts_with_answer,
)

SHARED_DATA = (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve()
PROFANITY_CSV = SHARED_DATA / "profanity" / "profanity_en.csv"
GENERATED = ("ioi", "induction")
CURATED_SIZES = {"capitals": (100, 150), "swear": (12, 24), "rhyme": (60, 100), "antonyms": (60, 100),
                 "successor": (57, 57), "plural": (60, 90), "past_tense": (60, 90),
                 "comparative": (60, 90), "language": (60, 90),
                 "continent": (60, 90), "first_letter": (60, 90)}

# --------------------------------------------------------------------------- build_docs


@pytest.mark.parametrize("name", GENERATED)
def test_generated_datasets_are_seeded(name):
    assert build_docs(name, n_docs=20, seed=3) == build_docs(name, n_docs=20, seed=3)
    assert build_docs(name, n_docs=20, seed=3) != build_docs(name, n_docs=20, seed=4)


@pytest.mark.parametrize("name", GENERATED)
def test_generated_dataset_sizes(name):
    assert len(build_docs(name)) == DEFAULT_N_DOCS
    docs = build_docs(name, n_docs=7, seed=1)
    assert len(docs) == 7
    assert docs == build_docs(name, n_docs=30, seed=1)[:7]  # a longer set extends a shorter one


@pytest.mark.parametrize("name", sorted(CURATED_SIZES))
def test_curated_dataset_sizes(name):
    low, high = CURATED_SIZES[name]
    docs = build_docs(name)
    assert low <= len(docs) <= high
    assert build_docs(name, n_docs=5) == docs[:5]
    assert build_docs(name, seed=9) == docs


@pytest.mark.parametrize("name", DATASETS)
def test_ids_are_unique_strings(name):
    if name not in BUILTIN_DATASETS and not SHARED_DATA.is_dir():
        pytest.skip("offline data mirror not available")
    ids = [doc["id"] for doc in build_docs(name, mirror=SHARED_DATA)]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == len(ids)


def test_paper_dataset_first_n_docs_from_the_mirror():
    if not SHARED_DATA.is_dir():
        pytest.skip("offline data mirror not available")
    docs = build_docs("gsm8k", n_docs=3, mirror=SHARED_DATA)
    assert [d["id"] for d in docs] == ["gsm8k-0000", "gsm8k-0001", "gsm8k-0002"]
    first = json.loads((SHARED_DATA / "gsm8k" / "test.jsonl").read_text().split("\n")[0])
    assert docs[0] == {"id": "gsm8k-0000", **first}
    assert build_docs("gsm8k", n_docs=3, seed=7, mirror=SHARED_DATA) == docs
    assert len(build_docs("mmlu", mirror=SHARED_DATA)) == 14042


def test_datasets_lists_builtin_and_paper_names():
    assert DATASETS[:13] == BUILTIN_DATASETS == ("ioi", "capitals", "induction", "swear", "rhyme", "antonyms",
                                                 "successor", "plural", "past_tense", "comparative", "language",
                                                 "continent", "first_letter")
    assert set(DATASETS[13:]) == {"gsm8k", "arithmetic", "mbpp", "humaneval", "hellaswag", "boolq",
                                 "arc_challenge", "mmlu", "wmdp_bio", "wmdp_chem", "wmdp_cyber"}


def test_unknown_dataset_names_the_valid_ones():
    with pytest.raises(ValueError, match="'gsm9k'") as error:
        build_docs("gsm9k")
    assert all(name in str(error.value) for name in DATASETS)


def test_n_docs_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        build_docs("ioi", n_docs=0)


def test_ioi_documents():
    docs = build_docs("ioi", n_docs=100)
    assert {doc["label"] for doc in docs} == {0, 1}  # the answer is not always the first name
    for doc in docs:
        answer, other = doc["choices"][doc["label"]], doc["choices"][1 - doc["label"]]
        assert answer != other
        assert doc["text"].count(other) == 2 and doc["text"].count(answer) == 1
        assert doc["text"].endswith(" to")


def test_induction_documents():
    for doc in build_docs("induction", n_docs=50):
        assert 6 <= len(doc["words"]) <= 10 and len(set(doc["words"])) == len(doc["words"])
        first, second, third = doc["text"].split("\n")
        assert first == second == " ".join(doc["words"])
        assert third == " ".join(doc["words"][:2])
        assert doc["target"] == doc["words"][2:5]


def test_capitals_documents():
    docs = {doc["country"]: doc for doc in build_docs("capitals")}
    assert docs["France"]["capital"] == "Paris" and docs["France"]["answers"] == ["Paris"]
    assert "Kiev" in docs["Ukraine"]["answers"]


def test_antonyms_documents():
    docs = {doc["word"]: doc for doc in build_docs("antonyms")}
    assert docs["hot"]["answers"] == ["cold"] and docs["cold"]["answers"] == ["hot", "warm"]
    assert all(doc["antonym"] == doc["answers"][0] != doc["word"] for doc in docs.values())


def test_successor_documents_hold_every_run_of_four_and_the_item_after_it():
    docs = build_docs("successor")
    by_id = {doc["id"]: doc for doc in docs}
    # days and months wrap round (7 and 12 runs); number words one..twenty and letters do not (16, 22)
    assert [sum(doc["id"].startswith(f"successor-{name}-") for doc in docs) for name in
            ("day", "month", "number", "letter")] == [7, 12, 16, 22]
    assert by_id["successor-day-05"]["text"] == "Saturday, Sunday, Monday, Tuesday," and \
        by_id["successor-day-05"]["answers"] == ["Wednesday"]
    assert by_id["successor-letter-21"]["text"] == "V, W, X, Y," and by_id["successor-letter-21"]["answer"] == "Z"
    assert by_id["successor-number-15"]["answer"] == "twenty"
    # the first documents hold every list: a task's first n_docs are not all days
    assert [doc["id"] for doc in docs[:4]] == ["successor-day-00", "successor-month-00", "successor-number-00",
                                               "successor-letter-00"]


# name -> (the word's field, the answer's field, the worked examples of the task's prompt)
WORD_FORMS = {"plural": ("word", "plural", {"hat", "scarf"}), "past_tense": ("verb", "past", {"laugh", "hide"}),
              "comparative": ("word", "comparative", {"tall", "easy"}),
              "first_letter": ("word", "letter", {"apple", "house"})}


@pytest.mark.parametrize("name", sorted(WORD_FORMS))
def test_word_form_documents_hold_each_word_once_with_its_forms(name):
    field, answer, examples = WORD_FORMS[name]
    docs = build_docs(name)
    words = [doc[field] for doc in docs]
    assert len(set(words)) == len(words)  # no word twice
    assert [doc["id"] for doc in docs] == [f"{name}-{word}" for word in words]
    for doc in docs:
        assert doc[answer] == doc["answers"][0] and all(doc["answers"])
        assert len(set(doc["answers"])) == len(doc["answers"])
    assert not examples & set(words)  # the prompt's worked examples are not asked


def test_plural_documents_mix_regular_and_irregular_nouns():
    docs = {doc["word"]: doc for doc in build_docs("plural")}
    assert docs["child"]["answers"] == ["children"] and docs["box"]["plural"] == "boxes"
    assert docs["city"]["plural"] == "cities" and docs["knife"]["plural"] == "knives"
    assert docs["sheep"]["plural"] == "sheep" and docs["person"]["answers"] == ["people", "persons"]
    irregular = [w for w, doc in docs.items() if not doc["plural"].startswith(w[:-1])]  # mice, feet, geese
    assert len(irregular) >= 10 and "mouse" in irregular and "dog" not in irregular


def test_past_tense_documents_mix_regular_and_irregular_verbs():
    docs = {doc["verb"]: doc for doc in build_docs("past_tense")}
    assert docs["go"]["answers"] == ["went"] and docs["walk"]["past"] == "walked"
    assert docs["cry"]["past"] == "cried" and docs["stop"]["past"] == "stopped"
    assert docs["learn"]["answers"] == ["learned", "learnt"]
    regular = [v for v, doc in docs.items() if doc["past"].endswith("ed") and doc["past"][:2] == v[:2]]
    assert 20 <= len(regular) <= len(docs) - 20  # both kinds well represented


def test_comparative_documents_mix_regular_and_irregular_adjectives():
    docs = {doc["word"]: doc for doc in build_docs("comparative")}
    assert docs["old"]["answers"] == ["older"] and docs["big"]["comparative"] == "bigger"
    assert docs["happy"]["comparative"] == "happier" and docs["large"]["comparative"] == "larger"
    assert docs["good"]["comparative"] == "better" and docs["far"]["answers"] == ["farther", "further"]
    plain = [w for w, doc in docs.items() if doc["comparative"] == w + "er"]
    assert 20 <= len(plain) <= len(docs) - 20  # -er beside the spelling changes and the irregular


def test_language_documents_name_each_country_once_with_its_languages():
    docs = build_docs("language")
    countries = [doc["country"] for doc in docs]
    assert len(set(countries)) == len(countries) and not {"France", "India"} & set(countries)  # the examples
    by_country = {doc["country"]: doc for doc in docs}
    assert by_country["Germany"]["answers"] == ["German"] and by_country["Austria"]["language"] == "German"
    assert by_country["Canada"]["answers"] == ["English", "French"]
    assert by_country["Saudi Arabia"]["id"] == "language-saudi-arabia"  # a stable id without spaces
    assert len({doc["id"] for doc in docs}) == len(docs)
    assert all(doc["language"] == doc["answers"][0] for doc in docs)


def test_continent_documents_name_each_country_once_with_its_continent():
    docs = build_docs("continent")
    countries = [doc["country"] for doc in docs]
    assert len(set(countries)) == len(countries) and not {"Japan", "Brazil"} & set(countries)  # the examples
    by_country = {doc["country"]: doc for doc in docs}
    assert by_country["Kenya"]["answers"] == ["Africa"] and by_country["Peru"]["continent"] == "South America"
    assert by_country["Fiji"]["answers"] == ["Oceania", "Australia"]
    assert by_country["Kenya"]["id"] == "continent-kenya"
    continents = {doc["continent"] for doc in docs}
    assert continents == {"Africa", "Asia", "Europe", "North America", "South America", "Oceania"}


def test_first_letter_documents_answer_each_word_with_the_letter_it_starts_with():
    docs = build_docs("first_letter")
    assert all(doc["answers"] == [doc["word"][0]] == [doc["letter"]] for doc in docs)
    assert len({doc["letter"] for doc in docs}) >= 24  # nearly every letter begins some word
    assert next(doc for doc in docs if doc["word"] == "river")["id"] == "first_letter-river"


# --------------------------------------------------------------------------- JSONL I/O


def test_read_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 3"):
        read_jsonl(path)
    path.write_text('{"id": "a"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: expected a JSON object"):
        read_jsonl(path)


def test_read_jsonl_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_write_jsonl_round_trip(tmp_path):
    docs = build_docs("ioi", n_docs=5) + [{"id": "ü", "text": "naïve\nline"}]
    path = tmp_path / "deep" / "er" / "docs.jsonl"
    write_jsonl(docs, path)
    assert read_jsonl(path) == docs
    assert len(path.read_text(encoding="utf-8").splitlines()) == len(docs)
    write_jsonl(docs[:2], path)  # overwrite
    assert read_jsonl(path) == docs[:2]
    assert [p.name for p in path.parent.iterdir()] == ["docs.jsonl"]  # no temp files left


def test_write_jsonl_is_atomic(tmp_path):
    path = tmp_path / "docs.jsonl"
    write_jsonl([{"id": "old"}], path)

    def failing():
        yield {"id": "new"}
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_jsonl(failing(), path)
    assert read_jsonl(path) == [{"id": "old"}]
    assert [p.name for p in tmp_path.iterdir()] == ["docs.jsonl"]


# --------------------------------------------------------------------------- identification subsets


def test_identification_subset():
    docs = build_docs("ioi", n_docs=50)
    subset = identification_subset(docs, 10, seed=0)
    assert len(subset) == 10 and len({d["id"] for d in subset}) == 10
    assert subset == identification_subset(docs, 10, seed=0)
    assert subset != identification_subset(docs, 10, seed=1)
    positions = [docs.index(d) for d in subset]
    assert positions == sorted(positions)  # original order kept
    assert identification_subset(docs, 50, seed=0) == docs


def test_identification_subset_errors():
    docs = build_docs("ioi", n_docs=5)
    with pytest.raises(ValueError, match=r"6.*5"):
        identification_subset(docs, 6, seed=0)
    with pytest.raises(ValueError, match="at least 1"):
        identification_subset(docs, 0, seed=0)


# --------------------------------------------------------------------------- scoring rules


@pytest.mark.parametrize(
    ("word", "target", "expected"),
    [
        ("hat", "cat", True), ("Hat", "cat", True), ("dog", "cat", False), ("cat", "cat", False),
        ("fountain", "mountain", True), ("lizard", "wizard", True), ("motion", "ocean", True),
        ("notaword", "cat", False), ("hat", "notaword", False), ("", "cat", False),
        ("the", "bee", False),  # unstressed 'the' (DH IY0) is no rhyme, and a function word
    ],
)
def test_rhymes(word, target, expected):
    assert rhymes(word, target) is expected


def test_first_word():
    assert first_word(' "Hat!" is one') == "hat"
    assert first_word("Don't know") == "don't"
    assert first_word("...") == ""


def test_starts_with_answer():
    assert starts_with_answer(" Bogotá.", ["Bogota"])
    assert starts_with_answer(" kiev", ["Kyiv", "Kiev"])
    assert starts_with_answer(" New Delhi", ["New Delhi"])
    assert not starts_with_answer(" Romeo", ["Rome"])
    assert not starts_with_answer(" the city of Paris", ["Paris"])


def test_count_profane_words_small_set():
    words = frozenset({"heck", "darn", "@ss"})
    text = 'Heck! Darn it, darn. What the HECK, you @ss... (darned) heckle'
    assert response_words("Heck! (darned) @ss...") == ["heck", "darned", "@ss"]
    assert count_profane_words(text, words) == 5  # heck x2, darn x2, @ss; not darned/heckle
    assert count_profane_words("", words) == 0


@pytest.mark.skipif(not PROFANITY_CSV.is_file(), reason="offline profanity list not available")
def test_count_profane_words_real_list():
    import pandas as pd

    frame = pd.read_csv(PROFANITY_CSV)
    columns = ["text", "canonical_form_1", "canonical_form_2", "canonical_form_3"]
    listed = {str(v).lower() for c in columns for v in frame[c].dropna()}
    response = "Well, damn it... this shitty printer! Fuck. FUCK this crap, said the teacher."
    tokens = ["well", "damn", "it", "this", "shitty", "printer", "fuck", "fuck", "this", "crap",
              "said", "the", "teacher"]  # tokenized by hand
    expected = sum(token in listed for token in tokens)
    assert expected >= 3  # at least damn and fuck twice are in the list
    assert count_profane_words(response, load_profanity(str(PROFANITY_CSV))) == expected


def test_load_profanity_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        load_profanity(str(tmp_path / "missing.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("word\nheck\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no 'text' column"):
        load_profanity(str(bad))


def test_load_profanity_local_csv_skips_phrases(tmp_path):
    path = tmp_path / "list.csv"
    path.write_text(
        "text,canonical_form_1,canonical_form_2,canonical_form_3,category_1,severity_rating\n"
        "H3ck,heck,,,mild,1\nape heck,heck,,,mild,1\nd@rn,darn,dang,,mild,1\n",
        encoding="utf-8",
    )
    assert load_profanity(str(path)) == {"h3ck", "heck", "d@rn", "darn", "dang"}


def test_hub_profanity_offline_says_what_to_do(tmp_path):
    """Offline with an empty Hugging Face cache, the hub list cannot load: the error says what to pass."""
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", "from headloc.data.scoring_rules import load_profanity; load_profanity()"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "\nRuntimeError: could not load the profanity list 'mmathys/profanity' from the Hugging Face Hub" in result.stderr
    assert result.stderr.rstrip().endswith("pass a local copy instead: profanity=/path/to/profanity_en.csv (the surge-ai/profanity CSV)")
