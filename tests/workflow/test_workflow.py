"""The whole DAG, for real, on a tiny random model and tiny data; dry runs of the documented CLI."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import CORES, PROFANITY_CSV, REPO, SHARED_DATA, job_counts, snakemake, tiny_llama

TOP_K = 2
# One model: a second model in a run (its own rows in every table) is test_staleness.py's second step
MODELS = ("tiny-a",)
SEARCHES = {"cs_stratified": "cs_stratified_m6_p0.25_n{}_s0", "greedy1s": "greedy1s_n{}_s0",
            "greedy": "greedy_k2_xu_n{}_s0"}  # xu: the universal filter is on (the default)
ID_DOCS = {"ioi": 4, "swear": 2}
CAPS = {"ioi": "syntax", "swear": "language", "arc": "general"}


def tiny_config(model_dirs):
    """Every feature of the paper grid on a tiny model: three methods, a tuning grid, universal,
    knowledge and extra head sets, and an evaluation-only paper task read from the offline mirror."""
    return {
        "data": {"mirror": str(SHARED_DATA)},
        "models": {name: {"source": str(path), "batch_size": 8} for name, path in model_dirs.items()},
        "tasks": {
            "ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 10, "capability": CAPS["ioi"]},
            "swear": {"lm_eval_task": "headloc_swear", "n_docs": 3, "id_docs": 2, "chat": True,
                      "relative": True, "metric": "profane_words", "capability": CAPS["swear"],
                      "dataset_kwargs": {"profanity": str(PROFANITY_CSV)},
                      "search": {"methods": ["cs_stratified"]}},
            "arc": {"lm_eval_task": "headloc_arc_challenge", "dataset": "arc_challenge", "n_docs": 6,
                    "metric": "acc_norm", "capability": CAPS["arc"], "localize": False},
        },
        "search": {"methods": ["cs_stratified", "greedy1s", "greedy"], "n_masks": 6, "sparsity": 0.25,
                   "id_docs": 4, "chunks": 2, "alpha": 0.001},
        "tuning": {"tasks": ["ioi"], "n_masks": [6, 8], "sparsity": [0.25]},
        "validation": {"top_k": TOP_K, "headsets": ["L0H1+L1H2"], "gen_tasks": ["arc"]},
        "universal": {"top_n": 3},
        "knowledge": {"tasks": ["ioi", "swear"], "eval_tasks": ["ioi"], "top_n": 1, "min_tasks": 1},
    }


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, tokenizer):
    dirs = {}
    for seed, name in enumerate(MODELS):
        dirs[name] = tmp_path_factory.mktemp(name)
        tiny_llama(len(tokenizer), seed=seed).save_pretrained(dirs[name])
        tokenizer.save_pretrained(dirs[name])
    return dirs


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_models):
    work = tmp_path_factory.mktemp("workflow")
    (work / "config.yaml").write_text(yaml.safe_dump(tiny_config(tiny_models)))
    snakemake("--cores", CORES, "--directory", str(work), "--configfile", str(work / "config.yaml"))
    return work / "results"


def read_json(path):
    return json.loads(Path(path).read_text())


def recovery(run, model, task, method):
    return read_json(run / model / task / SEARCHES[method].format(ID_DOCS[task]) / "recovery.json")


def canonical(heads):
    return "+".join(sorted(heads, key=lambda h: tuple(int(x) for x in h[1:].split("H")))) or "none"


@pytest.mark.slow
def test_data_and_subsets(tiny_run):
    docs = [json.loads(line) for line in (tiny_run / "data/ioi/test.jsonl").read_text().splitlines()]
    subset = [json.loads(line) for line in (tiny_run / "data/ioi/id_4_seed0.jsonl").read_text().splitlines()]
    assert len(docs) == 10 and len(subset) == 4
    assert all(doc in docs for doc in subset)
    arc = [json.loads(line) for line in (tiny_run / "data/arc/test.jsonl").read_text().splitlines()]
    assert len(arc) == 6 and arc[0]["id"].startswith("arc_challenge-")  # from the offline mirror


@pytest.mark.slow
@pytest.mark.parametrize("method", ["cs_stratified", "greedy1s"])
def test_masks_scores_and_recovery(tiny_run, method):
    search = tiny_run / "tiny-a" / "ioi" / SEARCHES[method].format(4)
    found = read_json(search / "recovery.json")
    if method == "greedy1s":  # one-shot greedy's matrix is greedy's round 1, scored once
        search = tiny_run / "tiny-a" / "ioi" / SEARCHES["greedy"].format(4) / "round1"
    masks = np.load(search / "masks.npy")
    n_heads = 2 * 4  # the tiny model: 2 layers x 4 heads
    assert masks.shape == ((6, n_heads) if method == "cs_stratified" else (n_heads + 1, n_heads))
    scores = pd.concat(pd.read_csv(search / f"scores/{c}.tsv", sep="\t") for c in (0, 1))
    assert sorted(scores["mask"]) == list(range(len(masks)))
    assert scores["score"].between(0, 1).all()
    samples = [json.loads(line) for line in (search / "scores/0.samples.jsonl").read_text().splitlines()]
    assert all(len(s["samples"]) == 4 for s in samples), "per-document records of the 4 subset docs"
    assert found["n_evals"] == len(masks) and len(found["top_heads"]) == TOP_K
    assert sorted(found["ranking"]) == sorted(f"L{l}H{h}" for l in range(2) for h in range(4))
    if method == "greedy1s":  # effect = single-head score - unablated score, read off the chunks
        by_mask = scores.set_index("mask")["score"]
        first = found["ranking"][0]
        layer, head = (int(x) for x in first[1:].split("H"))
        assert found["coef"][first] == pytest.approx(by_mask[1 + layer * 4 + head] - by_mask[0])


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_greedy_rounds_keep_the_worst_head(tiny_run, model):
    search = tiny_run / model / "ioi" / SEARCHES["greedy"].format(4)
    universal = [int(h[1]) * 4 + int(h[3]) for h in read_json(tiny_run / model / "universal_heads.json")["heads"]]
    chosen = []
    for round_ in (1, 2):
        masks = np.load(search / f"round{round_}/masks.npy")
        scores = pd.concat(pd.read_csv(p, sep="\t") for p in sorted((search / f"round{round_}/scores").glob("*.tsv")))
        scores = scores.sort_values("mask")["score"].to_numpy()
        # unablated + 8 heads alone, then the 7 others minus the universal heads (never candidates)
        assert len(masks) == (9 if round_ == 1 else 7 - len(set(universal) - set(chosen)))
        candidates = masks[1:] if round_ == 1 else masks
        rows = scores[1:] if round_ == 1 else scores
        added = [int((set(np.flatnonzero(c)) - set(chosen)).pop()) for c in candidates]
        best = min((v, h) for v, h in zip(rows, added) if h not in universal)[1]  # lowest, ties: lower head
        chosen.append(best)
        record = read_json(search / f"round{round_}/chosen.json")
        assert record["chosen"] == [f"L{h // 4}H{h % 4}" for h in chosen]
    found = read_json(search / "recovery.json")
    assert found["top_heads"] == record["chosen"] and found["n_evals"] == 9 + len(masks)


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_universal_heads_follow_the_documented_rule_and_are_filtered(tiny_run, model):
    """universal.detect: damage (the default): every head of each main ranking's top 3 and of its
    filtered top k is measured alone on every task's full data, and each filtered top k step by
    step, and its unfiltered top k whole; a head is universal when, alone, it lowers tasks of two
    capabilities by at least 10 % of their scale (here each task's unablated score: every task is
    shown in percent), its interval above zero, or when its step in a task's top k (and the set it
    completes) lowers a task of another capability so."""
    damage = read_json(tiny_run / model / "single_heads.json")
    rankings = {task: recovery(tiny_run, model, task, "cs_stratified")["ranking"] for task in ("ioi", "swear")}
    measured = set(damage["heads"])
    universal = read_json(tiny_run / model / "universal_heads.json")
    filtered = {task: [h for h in ranking if h not in universal["heads"]][:TOP_K] for task, ranking in rankings.items()}
    # its evaluation records hold the unablated model, each head measured and each filtered top k's
    # steps, on every task, with the values single_heads.json reports
    records = read_json(tiny_run / model / "single_heads.evals.json")["evals"]
    steps = {"+".join(sorted(heads[:i], key=lambda h: tuple(int(x) for x in h[1:].split("H"))))
             for heads in filtered.values() for i in range(2, len(heads) + 1)}
    wholes = {"+".join(sorted(ranking[:TOP_K], key=lambda h: tuple(int(x) for x in h[1:].split("H"))))
              for ranking in rankings.values()}  # each task's unfiltered top k: the scale of a task in its own unit
    assert set(records) == {"none", *measured, *steps, *wholes} == set(damage["sets"])
    for task, found in damage["tasks"].items():
        assert records["none"][task]["value"] == found["baseline"]
        assert found["unit"] == ("relative" if task == "swear" else "points") and found["scale"] == abs(found["baseline"])
        assert all(records[head][task]["value"] == damage["heads"][head][task]["value"] for head in measured)
    for step in damage["in_context"]:  # a step's drop: the set before it less the set with it
        after = "+".join(sorted(step["beside"].split("+") + [step["head"]] if step["beside"] != "none" else [step["head"]],
                                key=lambda h: tuple(int(x) for x in h[1:].split("H"))))
        for task, found in step["damage"].items():
            assert found["drop"] == pytest.approx(records[step["beside"]][task]["value"] - records[after][task]["value"])
            assert step["set_damage"][task]["drop"] == pytest.approx(records["none"][task]["value"] - records[after][task]["value"])

    def degrades(found, task):
        return (found["drop"] >= 0.1 * damage["tasks"][task]["scale"] and found["drop"] > 0
                and (found["low"] is None or found["low"] > 0))

    alone = {h for h in measured if len({CAPS[t] for t in damage["tasks"] if degrades(damage["heads"][h][t], t)}) >= 2}
    flagged = {(s["task"], s["beside"], s["head"]) for s in damage["in_context"]
               if len({CAPS[s["task"]]} | {CAPS[t] for t, found in s["damage"].items()
                                           if degrades(found, t) and degrades(s["set_damage"][t], t)}) >= 2}
    # every universal head is one by the rule, and no head a filtered top k keeps is (alone or its step)
    assert set(universal["heads"]) <= alone | {head for _, _, head in flagged}
    kept = {(task, "+".join(sorted(heads[:i], key=lambda h: tuple(int(x) for x in h[1:].split("H")))) or "none", head)
            for task, heads in filtered.items() for i, head in enumerate(heads)}
    assert not kept & flagged and not alone & {head for heads in filtered.values() for head in heads}
    for task, heads in filtered.items():  # a whole filtered top k that degrades another capability
        # holds no head whose step costs it at least that head's share of its own task
        mine = [s for s in damage["in_context"] if (s["task"], s["beside"], s["head"]) in kept and s["task"] == task]
        last = max(mine, key=lambda s: len(s["beside"].split("+")) if s["beside"] != "none" else 0)
        others = {t for t, found in last["set_damage"].items() if CAPS[t] != CAPS[task] and degrades(found, t)}

        def share(s, names):
            return sum(s["damage"][t]["drop"] / (damage["tasks"][t]["scale"] or 1.0) for t in names)
        assert not others or not [s for s in mine if share(s, others) > 0 and share(s, others) >= share(s, [task])]
    expected = universal["heads"]
    assert universal["rule"]["detect"] == "damage"
    for ranking in rankings.values():
        assert set(ranking[:3]) <= measured
        assert set([h for h in ranking if h not in expected][:TOP_K]) <= measured
    recoveries = pd.read_csv(tiny_run / "tables/recoveries.tsv", sep="\t").query("model == @model")
    for heads in recoveries["top_heads"]:
        assert not set(heads.split(",")) & set(expected)
    # the random model's heads degrade no two capabilities (L1H2, in the top 3 of both searched tasks,
    # is universal by the paper's ranking rule only): Table 7 says there are none
    table7 = pd.read_csv(tiny_run / "tables/table7.csv").query("model == @model")
    assert table7["head"].tolist() == (["BL", *expected] if expected else [])
    if not expected:
        assert "no universal heads" in (tiny_run / "tables/table7.md").read_text()


@pytest.mark.slow
def test_head_sets_evaluated_alone_are_copied_and_match_a_fresh_evaluation(tiny_run, tiny_models, tokenizer):
    """validate_headset copies the records single_heads.evals.json holds (the unablated model's,
    each single head's, each step of a filtered top k) instead of evaluating them again (its log
    says so); a head set the damage job did not measure (the extra one) it evaluates. The copied
    values equal an evaluation made here on the full data."""
    import numpy as np
    from transformers import AutoModelForCausalLM

    from headloc.engine.evaluation import MaskEvaluator
    from headloc.engine.lm_eval_tasks import TaskSpec
    from headloc.heads import parse_headset

    records = read_json(tiny_run / "tiny-a" / "single_heads.evals.json")["evals"]
    logs = tiny_run / "logs" / "validate_headset" / "tiny-a"
    written = {path.stem for path in (tiny_run / "tiny-a" / "evals" / "ioi").glob("*.json")}
    copied = [headset for headset in written if headset in records]
    assert "none" in copied and any("+" not in headset for headset in copied if headset != "none")
    assert sum("+" in headset for headset in copied) >= 2  # two searched tasks' top-k steps
    for headset in copied:
        assert "evaluated by rule single_head_damage" in (logs / f"{headset}.log").read_text()
        for task, docs in (("ioi", 10), ("swear", 3), ("arc", 6)):
            record = read_json(tiny_run / "tiny-a" / "evals" / task / f"{headset}.json")
            assert record == records[headset][task]
            assert (record["model"], record["task"], record["headset"], record["n_docs"]) == ("tiny-a", task, headset, docs)
            assert record["heads"] == parse_headset(headset) and len(record["samples"]) == docs
    assert "L0H1+L1H2" not in records
    assert "evaluated by rule single_head_damage" not in (logs / "L0H1+L1H2.log").read_text()
    model = AutoModelForCausalLM.from_pretrained(tiny_models["tiny-a"]).eval()
    task = TaskSpec("headloc_ioi").with_documents(str(tiny_run / "data" / "ioi" / "test.jsonl"))
    evaluator = MaskEvaluator(model, tokenizer, task, batch_size=8)
    head = sorted(h for h in copied if h != "none")[0]
    layer, index = (int(x) for x in head[1:].split("H"))
    mask = np.zeros(8, dtype=np.int8)
    assert records["none"]["ioi"]["value"] == pytest.approx(evaluator.evaluate_mask(mask).score, abs=1e-6)
    mask[layer * 4 + index] = 1
    assert records[head]["ioi"]["value"] == pytest.approx(evaluator.evaluate_mask(mask).score, abs=1e-6)


@pytest.mark.slow
def test_every_evaluation_row_matches_its_file(tiny_run):
    evals = pd.read_csv(tiny_run / "tables/evals_all.tsv", sep="\t", keep_default_na=False)
    # unfiltered: each search's own top k beside its filtered one (the universal filter is on); each
    # universal head alone, where the model has one
    universal = read_json(tiny_run / "tiny-a" / "universal_heads.json")["heads"]
    assert set(evals["kind"]) == {"task", "unfiltered", "knowledge", "extra"} | ({"universal"} if universal else set())
    assert set(evals.query("kind == 'universal' and k > 0")["headset"]) == set(universal)
    assert set(evals.query("kind == 'extra' and k > 0")["headset"]) == {"L0H1+L1H2"}
    for row in evals.query("eval_task != 'swear'").itertuples():
        record = read_json(tiny_run / f"{row.model}/evals/{row.eval_task}/{row.headset}.json")
        assert float(row.score) == pytest.approx(100 * record["value"])
    arc = read_json(tiny_run / "tiny-a/evals/arc/none.json")
    assert arc["n_docs"] == 6 and arc["metric"] == "acc_norm,none"


@pytest.mark.slow
def test_tables_and_figures(tiny_run):
    for table in [f"table{n}" for n in range(1, 11)] + ["tuning"]:
        md = (tiny_run / f"tables/{table}.md").read_text()
        assert "made by rule render_table" in md and "|" in md
        assert "\\begin{table}" in (tiny_run / f"tables/{table}.tex").read_text()
        assert (tiny_run / f"tables/{table}.csv").read_text().count("\n") >= 1
    table1 = pd.read_csv(tiny_run / "tables/table1.csv")
    assert table1.values.tolist() == [[model, 2, 4, 8] for model in MODELS]
    table2 = pd.read_csv(tiny_run / "tables/table2.csv")
    assert len(table2) == len(MODELS) * 2  # (model, searched task), main method only
    table4 = pd.read_csv(tiny_run / "tables/table4.csv")
    greedy_evals = read_json(tiny_run / "tiny-a" / "ioi" / SEARCHES["greedy"].format(4) / "recovery.json")["n_evals"]
    assert dict(zip(table4.query("model == 'tiny-a' and task == 'ioi'")["method"],
                    table4.query("model == 'tiny-a' and task == 'ioi'")["n_evals"])) == {
        "cs_stratified": 6, "greedy1s": 9, "greedy": greedy_evals}
    tuning = pd.read_csv(tiny_run / "tables/tuning.csv")
    assert len(tuning) == len(MODELS) * 2 and (tuning.groupby("model")["chosen"].apply(lambda c: (c == "yes").sum()) == 1).all()
    for figure in ("fig1", "fig2", "fig3", "fig4"):
        for ext, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF")):
            assert (tiny_run / f"figures/{figure}.{ext}").read_bytes().startswith(magic)
    logs = list((tiny_run / "logs").rglob("*.log"))
    assert {p.relative_to(tiny_run / "logs").parts[0] for p in logs} >= {
        "materialize_dataset", "subset_dataset", "make_masks", "score_masks", "make_greedy_masks",
        "choose_greedy_head", "recover_heads", "single_head_damage", "universal_heads", "score_top_heads",
        "choose_hyperparameters", "validate_headset", "model_geometry", "collect_evals",
        "collect_recoveries", "collect_models", "collect_tuning", "render_table", "render_figure"}


def score(run, model, eval_task, heads):
    """What the tables show for an evaluation: percent (ioi and arc are plain accuracies)."""
    return 100 * read_json(run / model / "evals" / eval_task / f"{canonical(heads)}.json")["value"]


def delta(run, model, eval_task, heads):
    return score(run, model, eval_task, heads) - score(run, model, eval_task, [])


def main_top(run, model, task, k):
    """The main search's best k heads that are not universal (the filter is on)."""
    universal = read_json(run / model / "universal_heads.json")["heads"]
    return [h for h in recovery(run, model, task, "cs_stratified")["ranking"] if h not in universal][:k]


@pytest.mark.slow
def test_tables_3_6_and_10_follow_the_evaluation_files(tiny_run):
    """Recomputed here from recovery.json and the evaluation records (ioi; swear's score is relative)."""
    table3, table6 = pd.read_csv(tiny_run / "tables/table3.csv"), pd.read_csv(tiny_run / "tables/table6.csv")
    table10 = pd.read_csv(tiny_run / "tables/table10.csv")
    assert len(table10) == len(MODELS) * len(ID_DOCS)  # one main search per (model, searched task)
    for model in MODELS:
        top = main_top(tiny_run, model, "ioi", TOP_K)
        # Table 3: ioi is the only task of its capability: one row, the search's own task
        rows = table3.query("model == @model and id_on == 'ioi'")
        assert rows["eval_on"].tolist() == ["ioi"] and rows["k"].tolist() == [TOP_K]
        assert rows["delta_task"].iloc[0] == pytest.approx(delta(tiny_run, model, "ioi", top), abs=0.05)
        assert rows["delta_gen"].iloc[0] == pytest.approx(delta(tiny_run, model, "arc", top), abs=0.05)
        # Table 6: the baseline, then each number of the top heads ablated
        rows = table6.query("model == @model and task == 'ioi'")
        assert rows["n_heads"].astype(str).tolist() == ["BL", *[str(n) for n in range(1, TOP_K + 1)]]
        assert rows["score"].iloc[0] == pytest.approx(score(tiny_run, model, "ioi", []), abs=0.05)
        assert rows[["delta_task", "delta_gen"]].iloc[0].isna().all()
        for n in range(1, TOP_K + 1):
            row = rows.iloc[n]
            assert row["score"] == pytest.approx(score(tiny_run, model, "ioi", top[:n]), abs=0.05)
            assert row["delta_task"] == pytest.approx(delta(tiny_run, model, "ioi", top[:n]), abs=0.05)
            assert row["delta_gen"] == pytest.approx(delta(tiny_run, model, "arc", top[:n]), abs=0.05)
        # Table 10: the main method's heads and evaluations, per searched task
        for task in ID_DOCS:
            row = table10.query("model == @model and task == @task").iloc[0]
            found = recovery(tiny_run, model, task, "cs_stratified")
            assert (row["method"], row["search"]) == ("cs_stratified", SEARCHES["cs_stratified"].format(ID_DOCS[task]))
            shown = "none" if found["found"] == [] else ", ".join(main_top(tiny_run, model, task, TOP_K))
            assert row["heads"] == shown
            assert row["n_evals"] == found["n_evals"] == 6
            # each of the top heads with its value, its 95 % interval and P(top k), as recovery.json has them
            effects = [re.fullmatch(r"(L\dH\d) (\S+)(?: \[(\S+), (\S+)\])?(?: P (\S+))?", words)
                       for words in row["effects"].split("; ")]
            assert [m[1] for m in effects] == main_top(tiny_run, model, task, TOP_K), row["effects"]
            for m in effects:
                head = m[1]
                assert float(m[2]) == pytest.approx(found["coef"][head], rel=5e-3, abs=1e-9)
                interval = found["interval"][head]
                assert (m[3] is None) == (interval is None)
                if interval is not None:
                    assert [float(m[3]), float(m[4])] == pytest.approx(interval, rel=5e-3, abs=1e-9)
                p_top_k = found["p_top_k"][head]
                assert (m[5] is None) == (p_top_k is None)
                assert p_top_k is None or float(m[5]) == pytest.approx(p_top_k, abs=0.005)


@pytest.mark.slow
def test_a_random_model_finds_no_head_and_every_table_says_so(tiny_run):
    """A random model carries no capability: its searches keep per-document scores, give each head an
    interval, find no head above the noise and say why; Tables 2, 3 and 10 say "none" for those rows
    with the reason in the note; greedy's rounds say they were not assessed."""
    for method in ("cs_stratified", "greedy1s"):
        found = recovery(tiny_run, "tiny-a", "ioi", method)
        assert found["found"] == [], (method, found["found"])
        assert found["no_head_found"] and not found["no_head_found"].startswith("not assessed")
        assert found["evidence"]["documents"] == ID_DOCS["ioi"]
        assert set(found["status"].values()) == {"measured" if method == "greedy1s" else "estimated"}
        assert any(interval is not None for interval in found["interval"].values())
        if method == "greedy1s":  # the unablated model's spread over the documents: none where all or none are right
            assert (found["noise_floor"] == 0) == (found["intercept"] in (0.0, 1.0)) and found["noise_floor"] >= 0
        else:
            assert found["noise_floor"] > 0
    greedy = recovery(tiny_run, "tiny-a", "ioi", "greedy")
    assert greedy["found"] is None and greedy["no_head_found"].startswith("not assessed")
    search = tiny_run / "tiny-a" / "ioi" / SEARCHES["cs_stratified"].format(4)
    lines = [json.loads(line) for c in (0, 1) for line in (search / f"scores/{c}.samples.jsonl").read_text().splitlines()]
    assert all(len(line["per_doc"]) == 4 and np.mean(line["per_doc"]) == pytest.approx(line["score"]) for line in lines)
    reason = recovery(tiny_run, "tiny-a", "ioi", "cs_stratified")["no_head_found"]
    for name in ("table2", "table3", "table10"):
        table = pd.read_csv(tiny_run / f"tables/{name}.csv")
        task = "task" if "task" in table.columns else "id_on"
        assert table.loc[table[task] == "ioi", "found"].eq("none").all(), name
        assert reason in " ".join((tiny_run / f"tables/{name}.md").read_text().split()), name  # notes wrap


@pytest.mark.slow
def test_tables_5_8_and_9_follow_the_evaluation_files(tiny_run):
    table5, table9 = pd.read_csv(tiny_run / "tables/table5.csv"), pd.read_csv(tiny_run / "tables/table9.csv")
    table8 = pd.read_csv(tiny_run / "tables/table8.csv", keep_default_na=False)
    # Table 5: one row per universal head; its Delta per capability (arc, the gen task, is Delta Gen)
    assert list(table5.columns) == ["model", "head", "delta_syntax", "delta_language", "delta_gen"]
    for model in MODELS:
        universal = read_json(tiny_run / model / "universal_heads.json")["heads"]
        rows = table5.query("model == @model")
        assert rows["head"].tolist() == universal
        for row in rows.itertuples():
            assert row.delta_syntax == pytest.approx(delta(tiny_run, model, "ioi", [row.head]), abs=0.05)
            assert row.delta_gen == pytest.approx(delta(tiny_run, model, "arc", [row.head]), abs=0.05)
    # Table 8: knowledge heads (ioi is the knowledge eval task), a BL row of plain scores first
    knowledge = pd.read_csv(tiny_run / "tables/evals_all.tsv", sep="\t", keep_default_na=False)
    knowledge = knowledge.query("kind == 'knowledge' and k > 0")
    assert len(knowledge) > 0
    for model in MODELS:
        heads = sorted(set(knowledge.query("model == @model")["headset"]), key=lambda h: canonical([h]))
        rows = table8.query("model == @model")
        assert rows["head"].tolist() == ["BL", *heads]
        assert float(rows["ioi"].iloc[0]) == pytest.approx(score(tiny_run, model, "ioi", []), abs=0.05)
        for row in rows.iloc[1:].itertuples():
            assert float(row.ioi) == pytest.approx(delta(tiny_run, model, "ioi", [row.head]), abs=0.05)
            assert float(row.knowledge_mc_avg) == pytest.approx(float(row.ioi), abs=0.05)
    # Table 9: every search of every method, its evaluations and its best non-universal k heads
    on_disk = {(model, task, method) for model in MODELS for task in ID_DOCS for method in SEARCHES
               if (tiny_run / model / task / SEARCHES[method].format(ID_DOCS[task]) / "recovery.json").exists()}
    assert {(r.model, r.task, r.method) for r in table9.itertuples()} == on_disk and len(table9) == len(on_disk)
    assert len(on_disk) == len(MODELS) * (3 + 1)  # ioi: three methods; swear: cs_stratified only
    for row in table9.itertuples():
        found = recovery(tiny_run, row.model, row.task, row.method)
        universal = read_json(tiny_run / row.model / "universal_heads.json")["heads"]
        assert row.search == SEARCHES[row.method].format(ID_DOCS[row.task]) and row.n_evals == found["n_evals"]
        assert row.heads.split(", ") == [h for h in found["ranking"] if h not in universal][:TOP_K]


@pytest.mark.slow
def test_a_second_run_has_nothing_to_do(tiny_run):
    work = tiny_run.parent
    result = snakemake("-n", "--directory", str(work), "--configfile", str(work / "config.yaml"))
    assert "Nothing to be done" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("change, measured_again", [({"filter": False}, False), ({"min_drop": 0.2}, True)])
def test_single_heads_are_measured_again_only_for_what_decides_them(tiny_run, tmp_path, change, measured_again):
    """single_head_damage is keyed on the universal keys it reads (top_n, min_drop, min_capabilities):
    turning the filter off does not measure every head again, a new min_drop does."""
    work = tiny_run.parent
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["universal"] |= change
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "results/tiny-a/single_heads.json", "--directory", str(work), "--configfile",
                       str(tmp_path / "config.yaml"))
    assert ("single_head_damage" in result.stdout) == measured_again, result.stdout[-2000:]


def threads_by_job(dry_run: str) -> list[tuple[str, int]]:
    """(rule, threads) of every job a dry run prints (a job of 1 thread prints no threads line)."""
    found = []
    for line in dry_run.splitlines():
        if rule := re.match(r"(?:local)?rule (\w+):$", line.strip()):
            found.append((rule[1], 1))
        elif found and (threads := re.match(r"threads: (\d+)$", line.strip())):
            found[-1] = (found[-1][0], int(threads[1]))
    return found


@pytest.mark.slow
def test_the_job_that_runs_alone_takes_every_core_of_a_local_run(tiny_run):
    """single_head_damage (one per model, after all its searches) gets every core --cores gives; the
    jobs that run side by side (each search's scoring jobs) one each."""
    work = tiny_run.parent
    result = snakemake("-n", "--forcerun", "single_head_damage", "score_masks", "--cores", "3",
                       "--directory", str(work), "--configfile", str(work / "config.yaml"))
    jobs = threads_by_job(result.stdout)
    assert {threads for rule, threads in jobs if rule == "single_head_damage"} == {3}, result.stdout[-3000:]
    assert {threads for rule, threads in jobs if rule == "score_masks"} == {1}, jobs


@pytest.mark.slow
def test_an_edited_library_module_reruns_the_jobs_whose_code_it_is(tiny_run, tmp_path, monkeypatch):
    """The library, copied elsewhere with the universal-heads module edited: rule single_head_damage
    (its script imports that module) re-runs for its changed code; the scoring jobs, whose modules are
    the same text at another path, do not."""
    import headloc

    shutil.copytree(Path(headloc.__file__).parent, tmp_path / "headloc",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "headloc/workflow/universal.py", "a") as module:
        module.write("# edited\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    work = tiny_run.parent
    result = snakemake("-n", "--directory", str(work), "--configfile", str(work / "config.yaml"))
    jobs = set(job_counts(result.stdout))
    assert "single_head_damage" in jobs and "Params have changed" in result.stdout, result.stdout[-3000:]
    assert not {"score_masks", "search_job", "subset_dataset"} & jobs, jobs


@pytest.mark.parametrize("args", [
    ["--cores", "1", "--resources", "gpu=1", "--configfile", str(REPO / "config/demo.yaml"), "--", "all"],
    ["results/tables/table2.md", "--cores", "1", "--resources", "gpu=1"],
    ["table2", "--cores", "1", "--resources", "gpu=1"],
])
def test_documented_spellings_dry_run(args, tmp_path):
    """As users type them, with the default config/config.yaml or after options that take several
    values (--resources, --configfile), ended by ``--``. ``snakemake all --cores 1 --resources gpu=1``
    runs as written in tests/integration/test_doc_blocks.py (README.md, docs/paper-grid.md), and what
    ``all`` schedules on the paper grid in tests/workflow/test_paper_grid.py."""
    result = snakemake("-n", "--directory", str(tmp_path), *args)
    jobs = set(job_counts(result.stdout))
    assert "render_table" in jobs and jobs & {"score_masks", "search_job"}, jobs  # the tables, from searches


def test_resources_swallows_a_trailing_target(tmp_path):
    """The Snakemake 9 pitfall documented in docs/pitfalls.md: --resources eats 'all'."""
    from snakemake.resources import Resources

    parse = Resources.parser_factory(allow_expressions=False)  # what --resources parses its values with
    assert parse(["gpu=1"])["gpu"] == 1
    with pytest.raises(ValueError) as swallowed:  # 'all' taken as a second resource
        parse(["gpu=1", "all"])
    result = snakemake("-n", "--cores", "1", "--resources", "gpu=1", "all", check=False, cwd=tmp_path)
    assert result.returncode == 1
    assert "in parse_args" in result.stderr and "snakemake/resources.py" in result.stderr, result.stderr[-2000:]
    assert result.stderr.rstrip().endswith(f"ValueError: {swallowed.value}"), result.stderr[-2000:]


def test_lint_and_format_are_clean(tmp_path):
    lint = snakemake("--lint", "--directory", str(tmp_path), "--configfile", str(REPO / "config/demo.yaml"))
    assert "Congratulations" in lint.stdout + lint.stderr
    fmt = subprocess.run([str(Path(sys.executable).parent / "snakefmt"), "--check", "Snakefile", "rules/"],
                         cwd=REPO, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stderr
