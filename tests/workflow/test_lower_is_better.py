"""A lower-is-better task end to end: an lm-eval task of one's own scored by word perplexity
(``loglikelihood_rolling``, two documents) on a tiny random model. The searches must rank first the
heads whose ablation *raises* perplexity, and the tables show its change in its own unit, oriented
so that negative is worse. Two more tasks are only evaluated, to make a Delta Gen of both
directions: the same perplexity in percent of its unablated value (``relative``, lower is better)
and a multiple-choice accuracy (higher is better).

The expectations are computed here from the workflow's own raw files (the single-head scores of
one-shot greedy, the validation files), never from the rankings under test.
"""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import CORES, snakemake, tiny_llama

TASK = """\
task: ppl_mine
dataset_path: json
dataset_kwargs:
  data_files:
    test: tasks/docs.jsonl
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
metric_list:
  - metric: word_perplexity
metadata:
  version: 1.0
"""
MC_TASK = """\
task: mc_mine
dataset_path: json
dataset_kwargs:
  data_files:
    test: tasks/mc.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{text}}"
doc_to_choice: "{{choices}}"
doc_to_target: label
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""
DOCS = ["The cat sat on the mat and looked at the door.", "Rain fell on the old town all night long."]
MC_DOCS = [{"text": "The cat sat on the", "choices": [" mat", " sky"], "label": 0},
           {"text": "Rain fell on the old", "choices": [" town", " idea"], "label": 0}]
SEARCH = "greedy1s_n2_s0"
TOP_K = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory, tokenizer):
    work = tmp_path_factory.mktemp("lower")
    model = work / "tiny"
    tiny_llama(len(tokenizer), seed=3).save_pretrained(model)
    tokenizer.save_pretrained(model)
    (work / "tasks").mkdir()
    (work / "tasks/ppl.yaml").write_text(TASK)
    (work / "tasks/docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    (work / "tasks/mc.yaml").write_text(MC_TASK)
    (work / "tasks/mc.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in MC_DOCS))
    config = {
        "include_path": ["tasks"],
        "models": {"tiny": {"source": str(model), "batch_size": 8}},
        "tasks": {"ppl": {"lm_eval_task": "ppl_mine", "metric": "word_perplexity", "n_docs": 2},
                  "ppl_rel": {"lm_eval_task": "ppl_mine", "metric": "word_perplexity", "n_docs": 2,
                              "relative": True, "localize": False},
                  "mc": {"lm_eval_task": "mc_mine", "metric": "acc", "n_docs": 2, "localize": False}},
        "search": {"methods": ["greedy1s"], "id_docs": 2, "chunks": 1},
        "validation": {"top_k": TOP_K, "method": "greedy1s"},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake("table2", "--cores", CORES, "--directory", str(work), "--configfile", str(work / "config.yaml"))
    return work / "results"


def read_json(path):
    return json.loads(Path(path).read_text())


@pytest.mark.slow
def test_the_top_heads_raise_perplexity(run):
    search = run / "tiny/ppl" / SEARCH
    scores = pd.read_csv(search / "scores/0.tsv", sep="\t").set_index("mask")
    assert not scores["higher_is_better"].any(), "the task's metric is lower-is-better (lm-eval's registry)"
    raw = scores["score"]
    # a head's effect is the raw perplexity with it alone ablated minus the unablated one (mask 0)
    rise = {f"L{(m - 1) // 4}H{(m - 1) % 4}": raw[m] - raw[0] for m in raw.index if m}
    found = read_json(search / "recovery.json")
    assert found["higher_is_better"] is False
    expected = sorted(rise, key=lambda head: -rise[head])[:TOP_K]
    assert found["top_heads"] == expected and rise[expected[0]] > 0, rise
    assert found["coef"][expected[0]] == pytest.approx(-rise[expected[0]])  # oriented: it hurts the task


def ablated_headset(run):
    top = read_json(run / "tiny/ppl" / SEARCH / "recovery.json")["top_heads"]
    return "+".join(sorted(top, key=lambda h: tuple(int(x) for x in h[1:].split("H"))))


def values(run, task):
    """Raw validation values of ``task``, unablated and with the search's top heads ablated."""
    evals = {p.stem: read_json(p)["value"] for p in (run / "tiny/evals" / task).glob("*.json")}
    return evals["none"], evals[ablated_headset(run)]


@pytest.mark.slow
def test_table2_shows_the_change_in_perplexity(run):
    """Delta Task of a lower-is-better task is oriented: the perplexity rises, so it is negative."""
    unablated, ablated = values(run, "ppl")
    table = pd.read_csv(run / "tables/table2.csv")
    assert table["delta_task"].item() == pytest.approx(-(ablated - unablated), rel=1e-9)
    assert ablated > unablated, "the top heads, ablated together, raise perplexity"


@pytest.mark.slow
def test_delta_gen_flips_the_sign_of_the_lower_is_better_task(run):
    """Delta Gen averages the other tasks' changes, each oriented by its direction: the relative
    perplexity (percent of unablated, lower is better) enters with its sign flipped, the accuracy
    (percentage points) as it is, so a rising perplexity counts as damage."""
    rel_unablated, rel_ablated = values(run, "ppl_rel")
    mc_unablated, mc_ablated = values(run, "mc")
    worse = -(100.0 * rel_ablated / rel_unablated - 100.0)
    expected = (worse + 100.0 * (mc_ablated - mc_unablated)) / 2
    table = pd.read_csv(run / "tables/table2.csv")
    assert worse < 0 and table["delta_gen"].item() == pytest.approx(expected, rel=1e-9)
    (collected,) = (run / "runs").glob("*/evals_main.tsv")  # what Table 2 read
    evals = pd.read_csv(collected, sep="\t")
    assert evals.groupby("eval_task")["higher_is_better"].unique().map(list).to_dict() == {
        "ppl": [False], "ppl_rel": [False], "mc": [True]}


@pytest.mark.slow
def test_table2_caption_says_how_each_task_enters(run):
    title = " ".join((run / "tables/table2.md").read_text().split("\n\n")[0].splitlines())  # broken at 100 columns
    assert "in the mean of mc, ppl_rel (Delta Gen)" in title  # a perplexity in its own unit is no part of it
    assert title.endswith("; negative = worse, each task entering as mc (acc, percentage points), ppl "
                          "(word_perplexity, own unit, lower is better: sign flipped), ppl_rel (word_perplexity, % "
                          "of unablated, lower is better: sign flipped)**"), title
