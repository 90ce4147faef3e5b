"""End to end on the real embedded model, at small scale: GGUF conversion included."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import CORES, snakemake


@pytest.mark.slow
def test_smollm2_small_search(tmp_path):
    config = {
        "models": {"smol": {"source": "smollm2-135m-instruct", "batch_size": 16}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 16}},
        "search": {"methods": ["cs_stratified"], "n_masks": 10, "sparsity": 0.05, "id_docs": 8, "chunks": 1},
        "validation": {"top_k": 2},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake("--cores", CORES, "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"))
    results = tmp_path / "results"
    assert json.loads((results / "models/smol/config.json").read_text())["num_attention_heads"] == 9
    search = results / "smol/ioi/cs_stratified_m10_p0.05_n8_s0"
    masks = np.load(search / "masks.npy")
    assert masks.shape == (10, 270) and (masks.sum(axis=1) == 14).all()  # round(0.05 * 270)
    baseline = json.loads((results / "smol/evals/ioi/none.json").read_text())
    assert baseline["n_docs"] == 16 and baseline["value"] >= 0.8, "SmolLM2 does IOI"
    scores = pd.read_csv(search / "scores/0.tsv", sep="\t")
    assert len(scores) == 10 and scores["score"].between(0, 1).all()
    table2 = pd.read_csv(results / "tables/table2.csv")
    assert list(table2["task"]) == ["ioi"] and np.isfinite(table2["delta_task"]).all()
