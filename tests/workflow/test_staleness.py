"""A cached table never shows another config's numbers: one directory, a chain of config changes.

Each step changes one input of the run (model set, n_masks, the data file's content, top_k, task
set), runs `snakemake table2` in the same directory and checks table2 against the files that step's
config implies, recomputed here from the evaluation records (universal filter off, so a search's
top-k heads are simply the first k of its ranking). The last step returns to an earlier config:
its table comes back byte for byte, and only collection and rendering run.
"""

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import snakemake, tiny_llama
from headloc.data import build_docs

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
    return snakemake(TARGET, *extra, "--cores", "2", "--directory", str(work), "--configfile",
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
    config = base_config(models, data_file)
    run(work, config)
    assert shown_table2(work) == expected_table2(work, config)

    # the model set: a second model's rows appear, computed from its own files
    config["models"]["tiny-b"] = {"source": str(models["tiny-b"]), "batch_size": 8}
    run(work, config)
    assert {row[0] for row in shown_table2(work)} == {"tiny-a", "tiny-b"}
    assert shown_table2(work) == expected_table2(work, config)
    two_models = copy.deepcopy(config)
    two_models_table = (work / "results/tables/table2.csv").read_bytes()

    # the number of masks: a new search, its table rows name it
    config["search"]["n_masks"] = 8
    run(work, config)
    assert {row[2] for row in shown_table2(work)} == {"cs_stratified_m8_p0.25_n4_s0"}
    assert shown_table2(work) == expected_table2(work, config)

    # back to an earlier config: its own table again, made without a single evaluation
    (work / "config.yaml").write_text(yaml.safe_dump(two_models))
    dry = snakemake(TARGET, "-n", "--directory", str(work), "--configfile", str(work / "config.yaml"))
    assert "score_masks" not in dry.stdout and "validate_headset" not in dry.stdout
    run(work, two_models)
    assert (work / "results/tables/table2.csv").read_bytes() == two_models_table

    # the data file's content (same path): re-read, re-scored, the table follows the new documents
    write_docs(data_file, build_docs("ioi", n_docs=10)[2:])
    run(work, config)
    assert read_json(work / "results/tiny-a/evals/ioi/none.json")["n_docs"] == 8
    assert shown_table2(work) == expected_table2(work, config)

    # validation.top_k
    config["validation"]["top_k"] = 2
    run(work, config)
    assert {row[3] for row in shown_table2(work)} == {2}
    assert shown_table2(work) == expected_table2(work, config)

    # the task set
    config["tasks"]["capitals"] = {"lm_eval_task": "headloc_capitals", "n_docs": 8}
    run(work, config)
    assert {row[1] for row in shown_table2(work)} == {"ioi", "capitals"}
    assert shown_table2(work) == expected_table2(work, config)
