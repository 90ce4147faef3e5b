"""Methods on trial as a workflow: every mask method side by side on a tiny random Llama.

One real run of `snakemake table4 methods` (2 layers x 4 heads, two tasks of two capabilities,
the universal filter on): greedy leaves the universal heads out of its rounds, one-shot greedy
reuses greedy's round 1, smaller budgets read the first rows of the full design, repeats draw new
designs, and Table 4 carries the recall of greedy's top k and the unfiltered deltas. Expectations
are recomputed here from the run's own files (masks, chunk scores, evaluations).
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import snakemake
from headloc.masks import make_masks

N_MASKS, BUDGET, TOP_K, ID_DOCS = 8, 6, 2, 4
HEADS = [f"L{layer}H{head}" for layer in range(2) for head in range(4)]
TASKS = ("ioi", "induction")
GREEDY, ONE_SHOT = f"greedy_k{TOP_K}_xu_n{ID_DOCS}_s0", f"greedy1s_n{ID_DOCS}_s0"


def cs(method, budget=N_MASKS, repeat=0):
    nested = budget != N_MASKS and method != "cs_adaptive"
    size = f"{budget}of{N_MASKS}" if nested else f"{budget}"
    return f"{method}_m{size}_p0.25_n{ID_DOCS}_s0" + (f"_r{repeat}" if repeat else "")


def read_json(path):
    return json.loads(Path(path).read_text())


def chunk_scores(folder):
    scores = pd.concat(pd.read_csv(p, sep="\t") for p in sorted(Path(folder).glob("scores/*.tsv")))
    return scores.sort_values("mask")["score"].to_numpy()


@pytest.fixture(scope="module")
def methods_run(tmp_path_factory, tiny_model_dir):
    work = tmp_path_factory.mktemp("methods")
    config = {
        "models": {"tiny": {"source": str(tiny_model_dir), "batch_size": 16}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 6,
                          "search": {"methods": ["cs_stratified", "greedy1s", "greedy", "cs_adaptive"]}},
                  "induction": {"lm_eval_task": "headloc_induction", "n_docs": 6}},
        "search": {"methods": ["cs_stratified", "greedy1s", "greedy"], "n_masks": N_MASKS,
                   "budgets": [BUDGET], "repeats": 2, "sparsity": 0.25, "id_docs": ID_DOCS, "chunks": 1,
                   "alpha": 0.001},
        "validation": {"top_k": TOP_K},
        # top 5 of 8 heads on each of two tasks: at least two heads are universal
        "universal": {"top_n": 5, "min_capabilities": 2, "filter": True},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake("table4", "methods", "--cores", "2", "--directory", str(work), "--configfile",
              str(work / "config.yaml"))
    return work / "results"


@pytest.mark.slow
def test_greedy_leaves_universal_heads_out_of_its_rounds(methods_run):
    universal = read_json(methods_run / "tiny" / "universal_heads.json")["heads"]
    assert len(universal) >= 2  # two top 5s of 8 heads share at least two
    excluded = [HEADS.index(h) for h in universal]
    for task in TASKS:
        folder = methods_run / "tiny" / task / GREEDY
        round1 = np.load(folder / "round1" / "masks.npy")
        assert np.array_equal(round1, np.vstack([np.zeros(8, dtype=np.int8), np.eye(8, dtype=np.int8)]))
        chosen, before = [], None
        for r in range(1, TOP_K + 1):
            masks, scores = np.load(folder / f"round{r}" / "masks.npy"), chunk_scores(folder / f"round{r}")
            if r > 1:
                assert not masks[:, excluded].any()  # later rounds never ablate a universal head
            rows = masks[1:] if r == 1 else masks
            values = scores[1:] if r == 1 else scores
            added = [int(np.flatnonzero(row & ~np.isin(np.arange(8), chosen))[0]) for row in rows]
            allowed = [(v, h) for v, h in zip(values, added) if h not in excluded and h not in chosen]
            best = min(allowed)[1]  # lowest score, ties to the lower head
            chosen.append(best)
            record = read_json(folder / f"round{r}" / "chosen.json")
            assert record["chosen"] == [HEADS[h] for h in chosen]
        recovery = read_json(folder / "recovery.json")
        assert recovery["ranking"][:TOP_K] == [HEADS[h] for h in chosen]
        assert not set(recovery["ranking"][:TOP_K]) & set(universal)
        assert recovery["n_evals"] == 9 + sum(8 - len(excluded) - r for r in range(1, TOP_K))


@pytest.mark.slow
def test_one_shot_greedy_is_greedys_round_one(methods_run):
    for task in TASKS:
        round1 = methods_run / "tiny" / task / GREEDY / "round1"
        scores = chunk_scores(round1)
        one_shot = read_json(methods_run / "tiny" / task / ONE_SHOT / "recovery.json")
        assert one_shot["n_evals"] == 9
        assert not (methods_run / "tiny" / task / ONE_SHOT / "masks.npy").exists()  # nothing scored twice
        effects = {HEADS[h]: scores[1 + h] - scores[0] for h in range(8)}
        assert one_shot["coef"] == pytest.approx(effects)


@pytest.mark.slow
def test_budgets_are_nested_and_repeats_draw_new_designs(methods_run):
    from headloc.recovery import recovery_for

    for method in ("cs_stratified",):  # cs_bernoulli takes the same path (its id and masks differ)
        for repeat in (0, 1):
            full = methods_run / "tiny" / "ioi" / cs(method, repeat=repeat)
            masks = np.load(full / "masks.npy")
            assert np.array_equal(masks, make_masks(8, N_MASKS, method=method, sparsity=0.25, random_state=repeat))
            nested = methods_run / "tiny" / "ioi" / cs(method, BUDGET, repeat)
            assert not (nested / "masks.npy").exists()
            recovery = read_json(nested / "recovery.json")
            assert recovery["n_evals"] == BUDGET
            fit = recovery_for(method, alpha=0.001, random_state=repeat).fit(masks[:BUDGET],
                                                                          chunk_scores(full)[:BUDGET])
            assert recovery["coef"] == pytest.approx(dict(zip(HEADS, fit.coef_.tolist())))


@pytest.mark.slow
def test_table4_recall_and_unfiltered_columns(methods_run):
    table = pd.read_csv(methods_run / "tables" / "table4.csv")
    universal = set(read_json(methods_run / "tiny" / "universal_heads.json")["heads"])
    searches = {cs("cs_stratified", b, r) for b in (BUDGET, N_MASKS) for r in (0, 1)}
    adaptive = {cs("cs_adaptive", b, r) for b in (BUDGET, N_MASKS) for r in (0, 1)}
    for task in TASKS:
        mine = table[table["task"] == task].set_index("search")
        assert set(mine.index) == searches | {GREEDY, ONE_SHOT} | (adaptive if task == "ioi" else set())
        greedy_top = set(read_json(methods_run / "tiny" / task / GREEDY / "recovery.json")["ranking"][:TOP_K])
        evals = methods_run / "tiny" / "evals" / task
        baseline = read_json(evals / "none.json")["value"]
        for search, row in mine.iterrows():
            ranking = read_json(methods_run / "tiny" / task / search / "recovery.json")["ranking"]
            filtered = [h for h in ranking if h not in universal][:TOP_K]
            assert row["recall"] == pytest.approx(len(set(filtered) & greedy_top) / TOP_K), search
            for heads, column in ((filtered, "delta_task"), (ranking[:TOP_K], "delta_task_unfiltered")):
                headset = "+".join(sorted(heads, key=lambda h: HEADS.index(h)))
                value = read_json(evals / f"{headset}.json")["value"]
                assert row[column] == pytest.approx(100 * (value - baseline), abs=1e-6), (search, column)
    assert (methods_run / "figures" / "methods.png").stat().st_size > 0


@pytest.mark.slow
def test_adaptive_searches_screen_then_refine(methods_run):
    from headloc.adaptive import stage_sizes
    from headloc.recovery import recovery_for

    for budget in (BUDGET, N_MASKS):
        for repeat in (0, 1):
            folder = methods_run / "tiny" / "ioi" / cs("cs_adaptive", budget, repeat)
            stage1, stage2 = np.load(folder / "masks.npy"), np.load(folder / "stage2" / "masks.npy")
            assert np.array_equal(stage1, make_masks(8, budget, method="cs_adaptive", sparsity=0.25,
                                                     random_state=repeat))
            assert len(stage1) == stage_sizes(budget)[0]
            plan = read_json(folder / "stage2" / "refinement.json")
            if plan["settled"]:
                assert len(stage2) == 0
            else:
                assert len(stage2) == stage_sizes(budget)[1]
                outside = [HEADS.index(h) for h in HEADS if h not in plan["candidates"]]
                assert not stage2[:, outside].any()  # stage 2 ablates candidates only
            recovery = read_json(folder / "recovery.json")
            assert recovery["n_evals"] == len(stage1) + len(stage2)
            y = np.concatenate([chunk_scores(folder), chunk_scores(folder / "stage2")])
            fit = recovery_for("cs_adaptive", alpha=0.001, random_state=repeat).fit(np.vstack([stage1, stage2]), y)
            assert recovery["coef"] == pytest.approx(dict(zip(HEADS, fit.coef_.tolist())))
