"""The gradient search methods (attribution, chg) as workflow searches, beside compressed sensing.

One real run of `snakemake results/tables/table9.md` on a tiny random Llama (2 layers x 4 heads):
rule gradient_search writes gradient.json, the recover_heads checkpoint turns it into recovery.json
in the format of the other methods, and Table 9 lists every method. Expectations are computed here
from the run's own files and a plain transformers forward pass, not from the methods' code.
"""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from conftest import snakemake

ID_DOCS, TOP_K, N_MASKS = 4, 3, 6
CHG = {"seeds": 2, "lam": 0.1, "steps": 6}
SEARCHES = {"cs_stratified": f"cs_stratified_m{N_MASKS}_p0.25_n{ID_DOCS}_s0",
            "attribution": f"attribution_n{ID_DOCS}_s0",
            "chg": f"chg_x{CHG['seeds']}_l{CHG['lam']:g}_t{CHG['steps']}_n{ID_DOCS}_s0"}
HEADS = [f"L{layer}H{head}" for layer in range(2) for head in range(4)]


def read_json(path):
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="module")
def gradient_run(tmp_path_factory, tiny_model_dir):
    work = tmp_path_factory.mktemp("gradient")
    config = {
        "models": {"tiny": {"source": str(tiny_model_dir), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 8}},
        "search": {"methods": list(SEARCHES), "n_masks": N_MASKS, "sparsity": 0.25, "id_docs": ID_DOCS,
                   "chunks": 1, "alpha": 0.001},
        "chg": CHG,
        "validation": {"top_k": TOP_K},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake("results/tables/table9.md", "--cores", "2", "--directory", str(work), "--configfile",
              str(work / "config.yaml"))
    return work / "results"


def recovery(run, method):
    return read_json(run / "tiny" / "ioi" / SEARCHES[method] / "recovery.json")


def gold_loglik(model_dir, examples):
    """Mean over documents of the gold continuation's log-likelihood, one unpadded forward each."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    total = 0.0
    with torch.no_grad():
        for example in examples:
            ids = torch.tensor([list(example.context) + list(example.target)])
            logprobs = torch.log_softmax(model(ids).logits[0, :-1].double(), dim=-1)
            n = len(example.target)
            gold = logprobs[-n:].gather(-1, ids[0, -n:, None])
            total += float(gold.sum())
    return total / len(examples)


@pytest.mark.slow
def test_gradient_searches_write_recoveries(gradient_run, tiny_model_dir):
    from transformers import AutoTokenizer

    from headloc.evaluation import TaskSpec
    from headloc.supervision import task_examples

    for method in ("attribution", "chg"):
        found = recovery(gradient_run, method)
        folder = gradient_run / "tiny" / "ioi" / SEARCHES[method]
        assert not (folder / "masks.npy").exists(), "a gradient search scores no masks"
        assert (gradient_run / "logs" / "gradient_search" / "tiny" / "ioi" / f"{SEARCHES[method]}.log").is_file()
        assert (found["model"], found["task"], found["search"], found["method"]) == (
            "tiny", "ioi", SEARCHES[method], method)
        assert (found["n_layers"], found["n_heads"]) == (2, 4)
        assert sorted(found["ranking"]) == sorted(HEADS) and sorted(found["coef"]) == sorted(HEADS)
        assert found["top_heads"] == found["ranking"][:TOP_K]
        cost = found["cost"]
        # the cost in masked evaluations: a fwd+bwd pass is three forward passes of the same tokens
        assert found["n_evals"] > 0
        assert found["n_evals"] == math.ceil((3 * cost["fwd_bwd_tokens"] + cost["forward_tokens"])
                                             / cost["eval_tokens"] - 1e-9)

    attribution = recovery(gradient_run, "attribution")
    # one fwd+bwd pass over the four documents (batch_size 8 holds them): three evaluations' worth
    assert attribution["cost"]["fwd_bwd_passes"] == 1 and attribution["n_evals"] == 3
    coef = attribution["coef"]
    assert attribution["ranking"] == sorted(HEADS, key=lambda h: (coef[h], HEADS.index(h)))
    assert all(coef[h] == pytest.approx(-attribution["gradient"][h]) for h in HEADS)
    # its intercept is the unablated score: the mean gold log-likelihood of the identification subset
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    subset = gradient_run / "data" / "ioi" / f"id_{ID_DOCS}_seed0.jsonl"
    assert len(subset.read_text().splitlines()) == ID_DOCS
    examples = task_examples(tokenizer, TaskSpec("headloc_ioi").with_documents(subset))
    assert len(examples) == ID_DOCS
    assert attribution["intercept"] == pytest.approx(gold_loglik(tiny_model_dir, examples), abs=1e-4)

    chg = recovery(gradient_run, "chg")
    # the config's chg section reached the fit: two seed rows, lambda 0.1, at most 6 updates per fit
    assert chg["hyperparameters"]["seeds"] == [0, 1] and chg["hyperparameters"]["lam"] == CHG["lam"]
    assert chg["hyperparameters"]["init_steps"] == chg["hyperparameters"]["fit_steps"] == CHG["steps"]
    assert len(chg["per_seed"]["g_minus"]) == CHG["seeds"]
    # its cost, counted from the plan of the fits: 3 training documents (one of 4 held out), no early
    # stop (held-out checks at steps 0 and 6 only), rows per pass capped by the model's batch_size 8:
    # the lambda=0 fit runs 2 gate rows (4 documents a pass), the G+/G- fit 4 rows (2 documents a pass)
    steps, rows, train = CHG["steps"], 8, ID_DOCS - 1
    assert all(run == steps for stage in chg["stages"].values() for run in stage["steps_run"])
    per_pass = {"init": rows // CHG["seeds"], "pm": rows // (2 * CHG["seeds"])}
    assert chg["cost"]["fwd_bwd_passes"] == steps * (math.ceil(train / per_pass["init"])
                                                     + math.ceil(train / per_pass["pm"]))
    assert chg["cost"]["fwd_bwd_rows"] == steps * train * (CHG["seeds"] + 2 * CHG["seeds"])
    assert chg["cost"]["forward_passes"] == 2 * 2 and chg["cost"]["forward_rows"] == 2 * (CHG["seeds"] + 2 * CHG["seeds"])
    # ranked by facilitation: mean G- over the seed rows, highest first
    g_minus = {h: sum(row[HEADS.index(h)] for row in chg["per_seed"]["g_minus"]) / CHG["seeds"] for h in HEADS}
    assert all(chg["g_minus"][h] == pytest.approx(g_minus[h]) for h in HEADS)
    ordered = [g_minus[h] for h in chg["ranking"]]
    assert ordered == sorted(ordered, reverse=True)
    assert all(chg["coef"][h] == pytest.approx(-g_minus[h]) for h in HEADS)
    held, trained = chg["split"]["holdout_doc_ids"], chg["split"]["train_doc_ids"]
    assert len(held) == 1 and sorted(held + trained) == [e.doc_id for e in examples]

    # the compressed-sensing search beside them is unchanged: masks, Lasso, M evaluations
    cs = recovery(gradient_run, "cs_stratified")
    assert cs["n_evals"] == N_MASKS and (gradient_run / "tiny" / "ioi" / SEARCHES["cs_stratified"] / "masks.npy").exists()


@pytest.mark.slow
def test_table9_lists_every_method(gradient_run):
    table = pd.read_csv(gradient_run / "tables" / "table9.csv")
    assert sorted(table["method"]) == sorted(SEARCHES)
    for row in table.itertuples():
        found = recovery(gradient_run, row.method)
        assert row.search == SEARCHES[row.method] and row.n_evals == found["n_evals"]
        assert row.heads.split(", ") == found["top_heads"]
    assert all(method in (gradient_run / "tables" / "table9.md").read_text() for method in SEARCHES)
