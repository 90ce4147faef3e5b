"""A lower-is-better task end to end: an lm-eval task of one's own scored by word perplexity
(``loglikelihood_rolling``, two documents) on a tiny random model. The searches must rank first the
heads whose ablation *raises* perplexity, and the tables show its change in its own unit.

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
DOCS = ["The cat sat on the mat and looked at the door.", "Rain fell on the old town all night long."]
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
    config = {
        "include_path": ["tasks"],
        "models": {"tiny": {"source": str(model), "batch_size": 8}},
        "tasks": {"ppl": {"lm_eval_task": "ppl_mine", "metric": "word_perplexity", "n_docs": 2}},
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


@pytest.mark.slow
def test_table2_shows_the_change_in_perplexity(run):
    evals = {p.stem: read_json(p)["value"] for p in (run / "tiny/evals/ppl").glob("*.json")}
    top = read_json(run / "tiny/ppl" / SEARCH / "recovery.json")["top_heads"]
    ablated = evals["+".join(sorted(top, key=lambda h: tuple(int(x) for x in h[1:].split("H"))))]
    table = pd.read_csv(run / "tables/table2.csv")
    assert table["delta_task"].item() == pytest.approx(ablated - evals["none"], abs=0.05)
    assert ablated > evals["none"], "the top heads, ablated together, raise perplexity"
    title = (run / "tables/table2.md").read_text().splitlines()[0]
    assert "in the mean of no task (Delta Gen)" in title  # a perplexity is no part of Delta Gen
    assert title.endswith("not in percentage points: ppl in its own unit (word_perplexity)**"), title
