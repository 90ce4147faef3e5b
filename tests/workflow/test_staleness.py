"""A cached table never shows another config's numbers: one directory, a chain of changes.

Each step runs `snakemake table2` in the same directory and checks table2 against the files that
step's config implies, recomputed here from the evaluation records (universal filter off, so a
search's top-k heads are simply the first k of its ranking). The steps: a first config; the model
set, n_masks and top_k changed at once (each shows in the table's rows, Table 1 lists both models,
and tests/unit/test_plan.py checks that each alone moves the collected tables); back to the first config, whose table comes
back byte for byte without a single evaluation; the data file's content changed under the same
path, which no config digest can see; the task set (last: a head set's validation job scores every
task, so a changed task set re-validates).
"""

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import CORES, snakemake, tiny_llama
from headloc.data.datasets import build_docs

TARGET = "table2"


def base_config(model_dirs, data_file):
    return {
        "models": {"tiny-a": {"source": str(model_dirs["tiny-a"]), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "data_file": str(data_file)}},
        "search": {"methods": ["cs_stratified"], "n_masks": 6, "sparsity": 0.25, "id_docs": 4, "chunks": 1,
                   "alpha": 0.001},
        "validation": {"top_k": 1},
        "universal": {"filter": False},
    }


def write_docs(path, docs):
    path.write_text("".join(json.dumps(doc) + "\n" for doc in docs))


def run(work, config, *extra):
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    return snakemake(TARGET, *extra, "--cores", CORES, "--directory", str(work), "--configfile",
                     str(work / "config.yaml"))


def read_json(path):
    return json.loads(Path(path).read_text())


def expected_table2(work, config):
    """(model, task, search, k, delta_task) rows from recovery.json and the evaluation files."""
    results, k = work / "results", config["validation"]["top_k"]
    search = config["search"]
    rows = []
    for model in config["models"]:
        for task, spec in config["tasks"].items():
            n_masks = spec.get("search", {}).get("n_masks", search["n_masks"])
            search_id = f"cs_stratified_m{n_masks}_p{search['sparsity']:g}_n{search['id_docs']}_s0"
            recovery = read_json(results / model / task / search_id / "recovery.json")
            assert recovery["n_evals"] == n_masks
            heads = sorted(recovery["ranking"][:k], key=lambda h: tuple(int(x) for x in h[1:].split("H")))
            ablated = read_json(results / model / "evals" / task / f"{'+'.join(heads)}.json")["value"]
            baseline = read_json(results / model / "evals" / task / "none.json")["value"]
            rows.append((model, task, search_id, k, round(100 * (ablated - baseline), 1)))
    return sorted(rows)


def shown_table2(work):
    table = pd.read_csv(work / "results/tables/table2.csv")
    return sorted((r.model, r.task, r.search, r.k, round(r.delta_task, 1)) for r in table.itertuples())


@pytest.fixture(scope="module")
def models(tmp_path_factory, tokenizer):
    dirs = {}
    for seed, name in enumerate(("tiny-a", "tiny-b")):
        dirs[name] = tmp_path_factory.mktemp(name)
        tiny_llama(len(tokenizer), seed=seed).save_pretrained(dirs[name])
        tokenizer.save_pretrained(dirs[name])
    return dirs


@pytest.mark.slow
def test_no_change_of_config_or_data_shows_a_stale_table(tmp_path, models):
    work = tmp_path
    data_file = work / "ioi.jsonl"
    write_docs(data_file, build_docs("ioi", n_docs=10))
    first = base_config(models, data_file)
    run(work, first)
    assert shown_table2(work) == expected_table2(work, first)
    first_table = (work / "results/tables/table2.csv").read_bytes()

    # the model set, the number of masks and top_k, all at once: every row follows (Table 1 too:
    # the only run of the suite with two models)
    config = copy.deepcopy(first)
    config["models"]["tiny-b"] = {"source": str(models["tiny-b"]), "batch_size": 8}
    config["search"]["n_masks"] = 8
    config["validation"]["top_k"] = 2
    run(work, config, "table1")
    table1 = pd.read_csv(work / "results/tables/table1.csv")
    assert table1.values.tolist() == [["tiny-a", 2, 4, 8], ["tiny-b", 2, 4, 8]]  # layers, heads, all heads
    shown = shown_table2(work)
    assert {row[0] for row in shown} == {"tiny-a", "tiny-b"}  # the second model's rows appear
    assert {row[2] for row in shown} == {"cs_stratified_m8_p0.25_n4_s0"}  # a new search, named
    assert {row[3] for row in shown} == {2}
    assert shown == expected_table2(work, config)

    # back to the first config: its own table again, made without a single evaluation
    (work / "config.yaml").write_text(yaml.safe_dump(first))
    dry = snakemake(TARGET, "-n", "--directory", str(work), "--configfile", str(work / "config.yaml"))
    assert "score_masks" not in dry.stdout and "validate_headset" not in dry.stdout
    assert "Nothing to be done" not in dry.stdout + dry.stderr  # the table shown is the other config's
    run(work, first)
    assert (work / "results/tables/table2.csv").read_bytes() == first_table

    # the data file's content (same path, same config): re-read, re-scored, the table follows
    write_docs(data_file, build_docs("ioi", n_docs=10)[2:])
    run(work, first)
    assert read_json(work / "results/tiny-a/evals/ioi/none.json")["n_docs"] == 8
    assert shown_table2(work) == expected_table2(work, first)

    # the task set: the new task's rows appear
    first["tasks"]["capitals"] = {"lm_eval_task": "headloc_capitals", "n_docs": 8}
    run(work, first)
    assert {row[1] for row in shown_table2(work)} == {"ioi", "capitals"}
    assert shown_table2(work) == expected_table2(work, first)
