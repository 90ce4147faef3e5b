"""The whole DAG, for real, on a tiny random model and tiny data; dry runs of the documented CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import PROFANITY_CSV, REPO, snakemake

TOP_K = 2


def tiny_config(model_dir):
    return {
        "models": {"tiny": {"source": str(model_dir), "batch_size": 8}},
        "tasks": {
            "ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 10},
            "swear": {"lm_eval_task": "headloc_swear", "n_docs": 3, "id_docs": 2, "chat": True, "relative": True,
                      "metric": "profane_words", "dataset_kwargs": {"profanity": str(PROFANITY_CSV)}},
        },
        "search": {"methods": ["cs_stratified", "greedy1s"], "n_masks": 6, "sparsity": 0.25,
                   "id_docs": 4, "chunks": 2, "alpha": 0.001},
        "validation": {"top_k": TOP_K},
    }


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_model_dir):
    work = tmp_path_factory.mktemp("workflow")
    (work / "config.yaml").write_text(yaml.safe_dump(tiny_config(tiny_model_dir)))
    snakemake("--cores", "2", "--directory", str(work), "--configfile", str(work / "config.yaml"))
    return work / "results"


SEARCHES = {"cs_stratified": "cs_stratified_m6_p0.25_n{}_s0", "greedy1s": "greedy1s_n{}_s0"}
ID_DOCS = {"ioi": 4, "swear": 2}


@pytest.mark.slow
def test_data_and_subsets(tiny_run):
    docs = [json.loads(line) for line in (tiny_run / "data/ioi/test.jsonl").read_text().splitlines()]
    subset = [json.loads(line) for line in (tiny_run / "data/ioi/id_4_seed0.jsonl").read_text().splitlines()]
    assert len(docs) == 10 and len(subset) == 4
    assert all(doc in docs for doc in subset)


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(SEARCHES))
def test_masks_scores_and_recovery(tiny_run, method):
    search = tiny_run / "tiny" / "ioi" / SEARCHES[method].format(4)
    masks = np.load(search / "masks.npy")
    n_heads = 2 * 4  # the tiny model: 2 layers x 4 heads
    assert masks.shape == ((6, n_heads) if method == "cs_stratified" else (n_heads + 1, n_heads))
    scores = pd.concat(pd.read_csv(search / f"scores/{c}.tsv", sep="\t") for c in (0, 1))
    assert sorted(scores["mask"]) == list(range(len(masks)))
    assert scores["score"].between(0, 1).all()
    samples = [json.loads(line) for line in (search / "scores/0.samples.jsonl").read_text().splitlines()]
    assert all(len(s["samples"]) == 4 for s in samples), "per-document records of the 4 subset docs"
    recovery = json.loads((search / "recovery.json").read_text())
    assert recovery["n_evals"] == len(masks) and len(recovery["top_heads"]) == TOP_K
    assert sorted(recovery["ranking"]) == sorted(f"L{l}H{h}" for l in range(2) for h in range(4))
    coef = recovery["coef"]
    assert [coef[h] for h in recovery["top_heads"]] == sorted(coef[h] for h in recovery["top_heads"])
    if method == "greedy1s":  # effect = single-head score - unablated score, read off the chunks
        by_mask = scores.set_index("mask")["score"]
        first = recovery["ranking"][0]
        layer, head = (int(x) for x in first[1:].split("H"))
        assert coef[first] == pytest.approx(by_mask[1 + layer * 4 + head] - by_mask[0])


@pytest.mark.slow
def test_validation_covers_every_headset_on_every_task(tiny_run):
    evals = pd.read_csv(tiny_run / "tables/evals.tsv", sep="\t")
    for method, pattern in SEARCHES.items():
        for task in ("ioi", "swear"):
            search = pattern.format(ID_DOCS[task])
            top = json.loads((tiny_run / "tiny" / task / search / "recovery.json").read_text())["top_heads"]
            for k in range(TOP_K + 1):
                headset = "+".join(sorted(top[:k], key=lambda h: tuple(int(x) for x in h[1:].split("H")))) or "none"
                for eval_task in ("ioi", "swear"):
                    record = json.loads((tiny_run / f"tiny/evals/{eval_task}/{headset}.json").read_text())
                    assert record["n_docs"] == (10 if eval_task == "ioi" else 3)
                    row = evals.query("search == @search and task == @task and k == @k and eval_task == @eval_task")
                    assert len(row) == 1
                    if eval_task == "ioi":
                        assert row["score"].iloc[0] == pytest.approx(100 * record["value"])


@pytest.mark.slow
def test_tables_and_figures(tiny_run):
    for table in ("table2", "table6", "table10"):
        md = (tiny_run / f"tables/{table}.md").read_text()
        assert "made by rule render_table" in md and "|" in md
        assert "\\begin{table}" in (tiny_run / f"tables/{table}.tex").read_text()
    table2 = pd.read_csv(tiny_run / "tables/table2.csv")
    assert len(table2) == 2 * len(SEARCHES)  # (task, search) pairs
    table10 = pd.read_csv(tiny_run / "tables/table10.csv")
    assert table10["heads"].str.count("L").eq(TOP_K).all()
    for ext, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF")):
        assert (tiny_run / f"figures/fig2.{ext}").read_bytes().startswith(magic)
    logs = list((tiny_run / "logs").rglob("*.log"))
    assert {p.relative_to(tiny_run / "logs").parts[0] for p in logs} >= {
        "materialize_dataset", "subset_dataset", "make_masks", "score_masks", "recover_heads",
        "validate_headset", "collect_results", "render_table", "render_figure"}


@pytest.mark.slow
def test_a_second_run_has_nothing_to_do(tiny_run):
    work = tiny_run.parent
    result = snakemake("-n", "--directory", str(work), "--configfile", str(work / "config.yaml"))
    assert "Nothing to be done" in result.stdout + result.stderr


@pytest.mark.parametrize("args", [
    ["all", "--cores", "1", "--resources", "gpu=1"],
    ["--cores", "1", "--resources", "gpu=1", "--", "all"],
    ["results/tables/table2.md", "--cores", "1", "--resources", "gpu=1"],
    ["table2", "--cores", "1", "--resources", "gpu=1"],
])
def test_documented_spellings_dry_run(args):
    """As users type them, with the default config/config.yaml (--configfile would also swallow targets)."""
    result = snakemake("-n", *args)
    assert "score_masks" in result.stdout


def test_resources_swallows_a_trailing_target():
    """The Snakemake 9 pitfall documented in docs/pitfalls.md: --resources eats 'all'."""
    result = snakemake("-n", "--cores", "1", "--resources", "gpu=1", "all", check=False)
    assert result.returncode != 0


def test_demo_dag_counts():
    result = snakemake("-n", "--configfile", "config/demo.yaml", "--forceall")
    counts = dict(line.split()[:2] for line in result.stdout.splitlines()
                  if line.split()[:1] and line.split()[0] in {"score_masks", "make_masks", "recover_heads"})
    demo = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    n_tasks = len(demo["tasks"])
    assert int(counts["make_masks"]) == n_tasks
    assert int(counts["score_masks"]) == n_tasks * demo["search"]["chunks"]
    assert int(counts["recover_heads"]) == n_tasks


def test_bad_config_fails_before_any_job(tmp_path):
    config = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    config["search"]["sparsity"] = 1.5
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--configfile", str(tmp_path / "bad.yaml"), check=False)
    assert result.returncode != 0 and "sparsity" in result.stdout + result.stderr
    config["search"]["sparsity"] = 0.05
    config["models"]["smollm2-135m"]["source"] = "./no/such/model"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--configfile", str(tmp_path / "bad.yaml"), check=False)
    assert "models.smollm2-135m.source" in result.stdout + result.stderr


def test_lint_and_format_are_clean():
    lint = snakemake("--lint", "--configfile", "config/demo.yaml")
    assert "Congratulations" in lint.stdout + lint.stderr
    fmt = subprocess.run([str(Path(sys.executable).parent / "snakefmt"), "--check", "Snakefile", "rules/"],
                         cwd=REPO, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stderr
