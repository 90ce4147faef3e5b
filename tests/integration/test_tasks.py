"""headloc's lm-eval tasks, end to end through lm-eval 0.4.13 (offline, tiny random model).

How a task gets its documents: lm-eval calls ``custom_dataset(**metadata, **dataset_kwargs)``.
A TaskManager's ``metadata`` reaches every loader, so
``TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata={"data_file": path})``
followed by ``load([name])`` evaluates the documents of ``path``. A bare dict spec
``load([{"task": name, "dataset_kwargs": ...}])`` is NOT an override of the registered task in
0.4.13: it is taken as a complete inline config (see the last tests).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")
from lm_eval.evaluator import evaluate  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from headloc.data.datasets import BUILTIN_DATASETS, build_docs, write_jsonl  # noqa: E402

TASKS_DIR = Path(__file__).resolve().parents[2] / "src" / "headloc" / "tasks"
PROFANITY_CSV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "profanity" / "profanity_en.csv"
TASKS = {  # task -> (metric, chat template?, valid range)
    "headloc_ioi": ("acc", False, (0.0, 1.0)),
    "headloc_capitals": ("acc", False, (0.0, 1.0)),
    "headloc_induction": ("acc", False, (0.0, 1.0)),
    "headloc_swear": ("profane_words", True, (0.0, float("inf"))),
    "headloc_rhyme": ("acc", True, (0.0, 1.0)),
    "headloc_antonyms": ("acc", False, (0.0, 1.0)),
    "headloc_successor": ("acc", False, (0.0, 1.0)),
    "headloc_plural": ("acc", False, (0.0, 1.0)),
    "headloc_past_tense": ("acc", False, (0.0, 1.0)),
    "headloc_comparative": ("acc", False, (0.0, 1.0)),
    "headloc_language": ("acc", False, (0.0, 1.0)),
    "headloc_continent": ("acc", False, (0.0, 1.0)),
    "headloc_first_letter": ("acc", False, (0.0, 1.0)),
}


def manager(**metadata) -> TaskManager:
    return TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata=metadata)


def write_profanity_csv(path: Path, words: list[str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "canonical_form_1", "canonical_form_2", "canonical_form_3",
                         "category_1", "category_2", "category_3", "severity_rating",
                         "severity_description"])
        for word in words:
            writer.writerow([word, word, "", "", "made up", "", "", 1, "Mild"])
    return path


@pytest.fixture(scope="module")
def tiny_lm(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=4, max_length=256)


def test_task_names_and_versions(tmp_path):
    words = write_profanity_csv(tmp_path / "list.csv", ["heck"])
    tasks = manager(n_docs=1, profanity=str(words)).load(sorted(TASKS))["tasks"]
    assert sorted(tasks) == sorted(TASKS) == sorted(f"headloc_{name}" for name in BUILTIN_DATASETS)
    for task in tasks.values():
        assert task.config.metadata["version"] == 1.0
        assert task.config.test_split == "test"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_runs_end_to_end(name, tiny_lm, tmp_path):
    metric, chat, (low, high) = TASKS[name]
    docs = build_docs(name.removeprefix("headloc_"), n_docs=3, seed=5)
    data_file = tmp_path / "docs.jsonl"
    write_jsonl(docs, data_file)
    metadata = {"data_file": str(data_file)}
    if name == "headloc_swear":
        if not PROFANITY_CSV.is_file():
            pytest.skip("offline profanity list not available")
        metadata["profanity"] = str(PROFANITY_CSV)
    output = evaluate(lm=tiny_lm, task_dict=manager(**metadata).load([name]), bootstrap_iters=0,
                      log_samples=True, apply_chat_template=chat, verbosity="WARNING")
    value = output["results"][name][f"{metric},none"]
    assert low <= value <= high
    assert [s["doc"]["id"] for s in output["samples"][name]] == [d["id"] for d in docs]


def test_process_results_scores_known_responses(tmp_path):
    words = write_profanity_csv(tmp_path / "list.csv", ["heck", "darn"])
    tasks = {}
    for name in TASKS:
        metadata = {"n_docs": 200}
        if name == "headloc_swear":
            metadata["profanity"] = str(words)
        tasks.update(manager(**metadata).load([name])["tasks"])

    def score(name, response, **match):
        doc = next(d for d in tasks[name].eval_docs if all(d[k] == v for k, v in match.items()))
        return tasks[name].process_results(doc, [response])

    assert score("headloc_capitals", " Paris.", country="France") == {"acc": 1.0}
    assert score("headloc_capitals", " **Kiev**", country="Ukraine") == {"acc": 1.0}
    assert score("headloc_capitals", " Lyon", country="France") == {"acc": 0.0}
    assert score("headloc_rhyme", ' "Hat"', word="cat") == {"acc": 1.0}
    assert score("headloc_rhyme", "The hat", word="cat") == {"acc": 0.0}  # first word counts
    assert score("headloc_rhyme", "Cat", word="cat") == {"acc": 0.0}
    assert score("headloc_swear", "Heck! Darn, darn it. HECK.", id="swear-00") == {"profane_words": 4}
    assert score("headloc_swear", "Golly gosh.", id="swear-00") == {"profane_words": 0}
    assert score("headloc_antonyms", " cold.", word="hot") == {"acc": 1.0}
    assert score("headloc_antonyms", ' "Warm"', word="cold") == {"acc": 1.0}  # an accepted opposite
    assert score("headloc_antonyms", " colder", word="hot") == {"acc": 0.0}
    assert score("headloc_successor", " Friday", id="successor-day-00") == {"acc": 1.0}
    assert score("headloc_successor", " and Friday.", id="successor-day-00") == {"acc": 1.0}  # ends the list
    assert score("headloc_successor", " Saturday", id="successor-day-00") == {"acc": 0.0}
    assert score("headloc_successor", " andFriday", id="successor-day-00") == {"acc": 0.0}
    assert score("headloc_successor", " F", id="successor-letter-01") == {"acc": 1.0}
    assert score("headloc_successor", " FG", id="successor-letter-01") == {"acc": 0.0}
    assert score("headloc_plural", " children.", word="child") == {"acc": 1.0}
    assert score("headloc_plural", " Persons", word="person") == {"acc": 1.0}  # an accepted plural
    assert score("headloc_plural", " childs", word="child") == {"acc": 0.0}
    assert score("headloc_plural", " sheeps", word="sheep") == {"acc": 0.0}  # whole word only
    assert score("headloc_plural", " child", word="child") == {"acc": 0.0}
    assert score("headloc_past_tense", " went", verb="go") == {"acc": 1.0}
    assert score("headloc_past_tense", " learnt.", verb="learn") == {"acc": 1.0}  # an accepted past
    assert score("headloc_past_tense", " goed", verb="go") == {"acc": 0.0}
    assert score("headloc_past_tense", " go", verb="go") == {"acc": 0.0}
    assert score("headloc_comparative", " better.", word="good") == {"acc": 1.0}
    assert score("headloc_comparative", " Further", word="far") == {"acc": 1.0}  # an accepted comparative
    assert score("headloc_comparative", " gooder", word="good") == {"acc": 0.0}
    assert score("headloc_comparative", " more good", word="good") == {"acc": 0.0}
    assert score("headloc_comparative", " big", word="big") == {"acc": 0.0}  # whole word only
    assert score("headloc_language", " German.", country="Austria") == {"acc": 1.0}
    assert score("headloc_language", " french", country="Canada") == {"acc": 1.0}  # an accepted language
    assert score("headloc_language", " Germanic", country="Germany") == {"acc": 0.0}
    assert score("headloc_language", " English", country="Germany") == {"acc": 0.0}
    assert score("headloc_continent", " South America.", country="Peru") == {"acc": 1.0}
    assert score("headloc_continent", " australia", country="Fiji") == {"acc": 1.0}  # an accepted continent
    assert score("headloc_continent", " South", country="Peru") == {"acc": 0.0}  # both words of it
    assert score("headloc_continent", " North America", country="Peru") == {"acc": 0.0}
    assert score("headloc_first_letter", " R.", word="river") == {"acc": 1.0}
    assert score("headloc_first_letter", " ri", word="river") == {"acc": 0.0}  # whole word only
    assert score("headloc_first_letter", " e", word="river") == {"acc": 0.0}

    induction = tasks["headloc_induction"].eval_docs[0]
    right = " " + " ".join(induction["target"]) + " more words"
    assert tasks["headloc_induction"].process_results(induction, [right]) == {"acc": 1.0}
    wrong = " " + " ".join(reversed(induction["target"]))
    assert tasks["headloc_induction"].process_results(induction, [wrong]) == {"acc": 0.0}
    assert tasks["headloc_swear"].aggregation()["profane_words"]([1, 4, 0]) == 5.0


@pytest.mark.parametrize("name, doc_id, gold", [("headloc_antonyms_loglik", "antonyms-cold", " hot"),
                                               ("headloc_successor_loglik", "successor-day-06", " Thursday"),
                                               ("headloc_plural_loglik", "plural-person", " people"),
                                               ("headloc_past_tense_loglik", "past_tense-learn", " learned"),
                                               ("headloc_comparative_loglik", "comparative-far", " farther"),
                                               ("headloc_language_loglik", "language-canada", " English"),
                                               ("headloc_continent_loglik", "continent-fiji", " Oceania"),
                                               ("headloc_first_letter_loglik", "first_letter-river", " r")])
def test_a_loglik_variant_scores_the_gold_answer_after_the_same_prompt(name, doc_id, gold):
    """The continuous variant asks for the log-likelihood of the accuracy task's first answer, after
    its prompt: the identification score and the validation measure the same answer."""
    tasks = manager().load([name, name.removesuffix("_loglik")])["tasks"]
    scored, generated = tasks[name], tasks[name.removesuffix("_loglik")]
    doc = next(d for d in scored.eval_docs if d["id"] == doc_id)
    assert scored.doc_to_text(doc) == generated.doc_to_text(doc)
    assert scored.doc_to_target(doc) == gold and generated.process_results(doc, [gold]) == {"acc": 1.0}
    assert scored.process_results(doc, [(-0.5, True)]) == {"loglik": -0.5}


@pytest.mark.parametrize("name, match, prompt", [
    ("headloc_plural", ("word", "child"),
     "Singular: hat. Plural: hats.\nSingular: scarf. Plural: scarves.\nSingular: child. Plural:"),
    ("headloc_past_tense", ("verb", "go"),
     "Present: laugh. Past: laughed.\nPresent: hide. Past: hid.\nPresent: go. Past:"),
    ("headloc_comparative", ("word", "big"),
     "Adjective: tall. Comparative: taller.\nAdjective: easy. Comparative: easier.\nAdjective: big. Comparative:"),
    ("headloc_language", ("country", "Germany"),
     "Country: France. Language: French.\nCountry: India. Language: Hindi.\nCountry: Germany. Language:"),
    ("headloc_continent", ("country", "Kenya"),
     "Country: Japan. Continent: Asia.\nCountry: Brazil. Continent: South America.\nCountry: Kenya. Continent:"),
    ("headloc_first_letter", ("word", "river"),
     "Word: apple. First letter: a.\nWord: house. First letter: h.\nWord: river. First letter:"),
])
def test_a_word_form_task_asks_after_two_worked_examples(name, match, prompt):
    """The prompt of src/headloc/tasks/README.md (for plural and past tense the best of those tried)."""
    task = manager().load([name])["tasks"][name]
    doc = next(d for d in task.eval_docs if d[match[0]] == match[1])
    assert task.doc_to_text(doc) == prompt


def test_loader_builds_with_seed_and_size():
    docs = manager(n_docs=4, seed=2).load(["headloc_ioi"])["tasks"]["headloc_ioi"].eval_docs
    assert [dict(d) for d in docs] == build_docs("ioi", n_docs=4, seed=2)


def test_swear_without_local_list_fails_at_load_time():
    with pytest.raises(Exception, match="profanity"):
        manager(n_docs=1, profanity="/nonexistent/profanity.csv").load(["headloc_swear"])


def test_dict_spec_is_inline_config_not_override(tmp_path):
    """lm-eval 0.4.13: a dict spec names a whole inline config; the YAML is not consulted."""
    data_file = tmp_path / "docs.jsonl"
    write_jsonl(build_docs("ioi", n_docs=3), data_file)
    with pytest.raises(Exception):  # no custom_dataset -> datasets.load_dataset(path=None)
        manager().load([{"task": "headloc_ioi", "dataset_kwargs": {"data_file": str(data_file)}}])


def test_dataset_kwargs_override_through_a_group(tmp_path):
    """A task named inside a group spec IS built from its YAML with the overrides on top."""
    data_file = tmp_path / "docs.jsonl"
    write_jsonl(build_docs("ioi", n_docs=3, seed=9), data_file)
    spec = {"group": "headloc_job", "task": [
        {"task": "headloc_ioi", "dataset_kwargs": {"data_file": str(data_file)}}]}
    task = manager().load([spec])["tasks"]["headloc_ioi"]
    assert [d["id"] for d in task.eval_docs] == [d["id"] for d in build_docs("ioi", n_docs=3)]
    assert task.eval_docs[0]["text"] == build_docs("ioi", n_docs=3, seed=9)[0]["text"]


@pytest.mark.slow
def test_smollm2_ioi_baseline(smollm2_dir, tmp_path):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=10, max_length=256)
    data_file = tmp_path / "ioi.jsonl"
    write_jsonl(build_docs("ioi", n_docs=20), data_file)
    output = evaluate(lm=lm, task_dict=manager(data_file=str(data_file)).load(["headloc_ioi"]),
                      bootstrap_iters=0, verbosity="WARNING")
    assert output["results"]["headloc_ioi"]["acc,none"] >= 0.8
