"""The parts of the benchmark scripts that decide what they report: the documents the SmolLM2
comparison searches, its table, the cs_adaptive that the variants are compared with, and the
ground-truth benchmark's scoring (headloc.groundtruth.scoring)."""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from headloc.data.datasets import identification_subset
from headloc.groundtruth import scoring

REPO = Path(__file__).resolve().parents[2]


def script(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_smollm2_comparison_searches_the_workflows_identification_subset():
    vs = script("smollm2_vs_greedy")
    docs = [{"id": str(i)} for i in range(107)]
    for seed in range(4):
        kept = [int(d["id"]) for d in identification_subset(docs, 20, seed)]  # rule subset_dataset's draw
        assert vs.identification_ids(107, 20, seed) == kept


def test_the_smollm2_table_compares_each_seed_with_greedys(tmp_path):
    vs = script("smollm2_vs_greedy")
    rows = [  # two seeds; accuracy 0.8 unablated
        ("greedy", 0, ["A", "B"], 100, 0.1), ("greedy", 1, ["A", "C"], 100, 0.2),
        ("group_testing", 0, ["A", "D"], 10, 0.3), ("group_testing", 1, ["C", "A"], 6, 0.2),
    ]
    with (tmp_path / "ioi-s0.jsonl").open("w") as handle:
        for method, seed, top, evals, ablated in rows:
            handle.write(json.dumps({"kind": "validation", "task": "ioi", "seed": seed, "method": method, "top": top,
                                     "n_evals": evals, "seconds": 1.0, "clean": 0.8, "ablated": ablated}) + "\n")
    line = next(row for row in vs.table([tmp_path]).splitlines() if "| ioi | group_testing |" in row)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    # Delta Task -50 and -60: mean -55, s.e. 5; minus greedy's: +20 and 0; overlap 1 and 2; 8 % of greedy's
    assert cells[2:9] == ["2", "-55.0 ± 5.0", "+10.0 ± 10.0", "1.5", "8", "8.0 %", "1.0"]


def test_the_smollm2_table_adds_the_searchs_continuous_score_in_its_own_unit(tmp_path):
    """A record with the search's own score on the full data (the ioi margin) gives rows "ioi (margin)":
    the change in margin, not 100 x it, against greedy's seed by seed."""
    vs = script("smollm2_vs_greedy")
    rows = [("greedy", 0, 4.0, -3.0), ("greedy", 1, 4.0, -2.0), ("group_testing", 0, 4.0, 1.0),
            ("group_testing", 1, 4.5, 0.5)]
    with (tmp_path / "ioi-s0.jsonl").open("w") as handle:
        for method, seed, clean, ablated in rows:
            handle.write(json.dumps({"kind": "validation", "task": "ioi", "seed": seed, "method": method,
                                     "top": ["A"], "n_evals": 10, "seconds": 1.0, "clean": 0.8, "ablated": 0.2,
                                     "id_metric": "margin", "id_clean": clean, "id_ablated": ablated,
                                     "id_filtered_ablated": ablated}) + "\n")
    line = next(row for row in vs.table([tmp_path]).splitlines() if "| ioi (margin) | group_testing |" in row)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    # changes -3 and -4: mean -3.5, s.e. 0.5; greedy's -7 and -6: gaps +4 and +2
    assert cells[2:5] == ["2", "-3.5 ± 0.5", "+3.0 ± 1.0"]


def test_the_variants_baseline_is_the_workflows_cs_adaptive():
    av = script("adaptive_variants")
    from headloc.heads import HeadGeometry

    effect = np.zeros(60)
    effect[[4, 9, 30]] = [-0.4, -0.3, -0.2]
    noise = np.random.default_rng(0)
    score = lambda masks: 0.9 + np.asarray(masks) @ effect + 0.01 * noise.standard_normal(len(masks))  # noqa: E731
    geometry = HeadGeometry(6, 10)
    for seed in (0, 1):
        noise = np.random.default_rng(seed)  # the same noise for both runs: they score the same masks
        with tempfile.TemporaryDirectory() as tmp:
            settings = av.gt.SearchSettings(n_masks=40, seed=seed, top_k=3, sparsity=av.gt.SPARSITY, alpha=av.gt.ALPHA)
            driven = av.gt.drive(av.gt.methods.get("cs_adaptive"), score, geometry, Path(tmp), settings, log=av.gt.LOG)
        noise = np.random.default_rng(seed)
        ranking, n_evals = av.variant_ranking("built", score, 60, 3, 40, seed)
        assert [geometry.names[h] for h in ranking] == driven["ranking"] and n_evals == driven["n_evals"]
    for name in ("share50", "confirm", "residual"):
        ranking, n_evals = av.variant_ranking(name, score, 60, 3, 40, 0)
        assert sorted(ranking) == list(range(60)) and n_evals <= 40
        assert set(ranking[:3]) == {4, 9, 30}, name


def test_an_unknown_variant_is_refused():
    av = script("adaptive_variants")
    with pytest.raises(ValueError, match="unknown variant 'half'; expected one of built, share50, confirm, residual"):
        av.variant_ranking("half", lambda masks: np.zeros(len(masks)), 60, 3, 40, 0)


# ------------------------------------------------------------------ the ground-truth benchmark's scoring


def recall_rows():
    """Two placements of one size (64 heads), one certified task each plus one failing task; greedy,
    group testing at four budgets over two seeds. Recalls, evaluations and found flags chosen so that
    every summary number below can be worked out by hand."""
    import pandas as pd

    base = {"size": "c64", "n_heads": 64, "k": 4, "seconds": 1.0, "top": ""}
    rows = []
    for model in ("c64-s0", "c64-s1"):
        rows.append({**base, "model": model, "task": "copy", "method": "greedy", "budget": None, "seed": 0,
                     "n_evals": 200, "certified": True, "recall": 1.0, "universal_found": True, "pair_found": True})
        rows.append({**base, "model": model, "task": "bad", "method": "greedy", "budget": None, "seed": 0,
                     "n_evals": 200, "certified": False, "recall": 0.0, "universal_found": False,
                     "pair_found": False})
        for seed, (r50, r100) in enumerate([(0.5, 1.0), (1.0, 1.0)]):
            rows.append({**base, "model": model, "task": "copy", "method": "group_testing", "budget": 50,
                         "seed": seed, "n_evals": 40, "certified": True, "recall": r50, "universal_found": True,
                         "pair_found": seed == 1})
            r75 = 0.84 if (model, seed) == ("c64-s1", 1) else 1.0  # mean 0.96, but all found in 3 of 4
            rows.append({**base, "model": model, "task": "copy", "method": "group_testing", "budget": 75,
                         "seed": seed, "n_evals": 50, "certified": True, "recall": r75, "universal_found": True,
                         "pair_found": True})
            rows.append({**base, "model": model, "task": "copy", "method": "group_testing", "budget": 100,
                         "seed": seed, "n_evals": 60, "certified": True, "recall": r100, "universal_found": True,
                         "pair_found": True})
            rows.append({**base, "model": model, "task": "copy", "method": "group_testing", "budget": 200,
                         "seed": seed, "n_evals": 80, "certified": True, "recall": 1.0, "universal_found": True,
                         "pair_found": True})
    return pd.DataFrame(rows)


def test_the_ground_truth_summary_counts_certified_tasks_only():
    summary = scoring.summarise(recall_rows())
    greedy = summary[summary["method"] == "greedy"].iloc[0]  # its failing task (recall 0) left out
    assert (greedy["runs"], greedy["recall"], greedy["p_all_found"], greedy["ratio_to_greedy"]) == (2, 1.0, 1.0, 1.0)
    at50 = summary[(summary["method"] == "group_testing") & (summary["budget"] == 50)].iloc[0]
    # recalls 0.5, 1, 0.5, 1: mean 0.75, s.d. 0.2887, s.e. 0.1443; all found in 2 of 4; pair in 2 of 4
    assert at50["runs"] == 4 and at50["placements"] == 2
    assert at50["recall"] == pytest.approx(0.75) and at50["se"] == pytest.approx(0.5 / np.sqrt(3) / 2)
    assert at50["p_all_found"] == 0.5 and at50["pair_found"] == 0.5 and at50["universal_found"] == 1.0
    assert at50["n_evals"] == 40 and at50["ratio_to_greedy"] == pytest.approx(0.2)
    at100 = summary[(summary["method"] == "group_testing") & (summary["budget"] == 100)].iloc[0]
    assert (at100["recall"], at100["p_all_found"], at100["ratio_to_greedy"]) == (1.0, 1.0, pytest.approx(0.3))


def test_the_goal_cell_is_the_cheapest_budget_meeting_both_goals():
    cells = scoring.goal_cells(scoring.summarise(recall_rows())).set_index("method")
    # budget 50: mean recall 0.75 < 0.95; budget 75: mean 0.96 but P(recall = 1) = 0.75 < 0.9; 200 costs more
    assert cells.loc["group_testing", "budget"] == 100
    assert cells.loc["greedy", "n_evals"] == 200


def test_the_budget_fit_reads_the_smallest_budget_at_the_recall_goal():
    fit = scoring.budget_fit(recall_rows())
    assert fit["method"].tolist() == ["group_testing"]  # greedy spends no budget; the failing task is left out
    row = fit.iloc[0]
    assert row["masks_at_goal"] == 50 and row["k"] == 4  # budget 75: mean recall 0.96 >= 0.95
    assert row["per_k_log_n"] == pytest.approx(50 / (4 * np.log(64 / 4)))


def test_task_truth_gives_the_universal_head_and_the_pair_slots_of_their_own():
    entry = {"planted": {"L0H1": {"role": "universal"}, "L1H0": {"role": "copy"}, "L2H3": {"role": "copy"},
                         "L3H0": {"role": "pair"}, "L3H1": {"role": "pair"}},
             "pair": {"heads": ["L3H0", "L3H1"]}, "certificate": {"passes": True, "weakest": "L2H3"}}
    truth = scoring.task_truth(entry)
    assert truth["roles"] == ["L1H0", "L2H3"] and truth["universal"] == ["L0H1"]
    assert truth["k"] == 5 and truth["certified"] and truth["weakest"] == "L2H3"
    assert truth["backup"] == truth["redundant"] == truth["synergy"] == []


def interaction_entry(passes=(True, True, True)) -> dict:
    """A task of every kind: the universal head, a single role head, a backup (primary L1H1, backup
    L3H1), a redundant pair and a synergy pair, each interaction passing or not as told."""
    planted = {"L0H0": "universal", "L2H0": "a2", "L1H1": "bk", "L3H1": "bk", "L1H2": "rd", "L3H2": "rd",
               "L1H3": "sy", "L2H3": "sy"}
    heads = {"backup": ["L1H1", "L3H1"], "redundant": ["L1H2", "L3H2"], "synergy": ["L1H3", "L2H3"]}
    return {"planted": {h: {"role": r} for h, r in planted.items()},
            "certificate": {"passes": True, "weakest": "L2H0"},
            "interactions": [{"kind": kind, "heads": hs, "passes": ok} for (kind, hs), ok in zip(heads.items(), passes)]}


def test_task_truth_sorts_every_planted_head_into_one_kind():
    truth = scoring.task_truth(interaction_entry())
    # the backup's primary acts alone (a single); its backup head, and both heads of each pair, are their kind's
    assert truth["roles"] == ["L2H0", "L1H1"] and truth["universal"] == ["L0H0"] and truth["pair"] == []
    assert truth["backup"] == ["L3H1"] and truth["redundant"] == ["L1H2", "L3H2"]
    assert truth["synergy"] == ["L1H3", "L2H3"]
    assert truth["k"] == 8 and truth["certified"]  # a slot for every planted head
    for failing in range(3):  # any interaction's failing certificate leaves the task out
        assert not scoring.task_truth(interaction_entry(tuple(i != failing for i in range(3))))["certified"]


def test_found_scores_each_kind_in_the_top_k():
    truth = scoring.task_truth(interaction_entry())
    got = scoring.found(["L0H0", "L1H1", "L1H2", "L1H3", "L2H3", "L5H5", "L6H6", "L7H7"], truth)
    assert got["recall"] == 0.5  # L1H1 found, L2H0 not
    assert (got["recall_backup"], got["recall_redundant"], got["recall_synergy"]) == (0.0, 0.5, 1.0)
    assert got["universal_found"] is True and np.isnan(got["pair_found"])
    plain = scoring.found(["L1H0"], scoring.task_truth({"planted": {"L1H0": {"role": "copy"}}}))
    assert plain["recall"] == 1.0 and all(np.isnan(plain[f"recall_{k}"]) for k in scoring.KINDS)


def test_the_summary_reports_each_kinds_recall_and_p_all_found():
    import pandas as pd

    base = {"size": "i64", "n_heads": 64, "model": "i64-s0", "k": 8, "seconds": 1.0, "top": "", "budget": 50,
            "certified": True, "universal_found": True, "pair_found": np.nan, "n_evals": 30}
    rows = [  # three seeds of one method on two tasks: one with singles and a backup, one with both pairs
        {**base, "task": "backup2", "seed": 0, "recall": 1.0, "recall_backup": 1.0},
        {**base, "task": "backup2", "seed": 1, "recall": 1.0, "recall_backup": 0.0},
        {**base, "task": "backup2", "seed": 2, "recall": 0.5, "recall_backup": 0.0},
        {**base, "task": "pairs", "seed": 0, "recall": np.nan, "recall_redundant": 1.0, "recall_synergy": 1.0},
        {**base, "task": "pairs", "seed": 1, "recall": np.nan, "recall_redundant": 0.5, "recall_synergy": 1.0},
        {**base, "task": "pairs", "seed": 2, "recall": np.nan, "recall_redundant": 0.0, "recall_synergy": 0.5},
        {**base, "task": "bad", "seed": 0, "recall": np.nan, "recall_synergy": 0.0, "certified": False},
    ]
    row = scoring.summarise(pd.DataFrame(rows).assign(method="group_testing")).iloc[0]
    assert row["runs"] == 3 and row["recall"] == pytest.approx(2.5 / 3) and row["p_all_found"] == pytest.approx(2 / 3)
    assert row["recall_backup"] == pytest.approx(1 / 3) and row["p_all_backup"] == pytest.approx(1 / 3)
    assert row["recall_redundant"] == pytest.approx(0.5) and row["p_all_redundant"] == pytest.approx(1 / 3)
    # the failing task's synergy (0) is left out: 1, 1, 0.5
    assert row["recall_synergy"] == pytest.approx(2.5 / 3) and row["p_all_synergy"] == pytest.approx(2 / 3)


def test_the_summary_reads_a_recall_table_from_before_the_interactions():
    summary = scoring.summarise(recall_rows())  # no recall_<kind> columns, as in earlier runs' recall.csv
    assert summary[[f"recall_{k}" for k in scoring.KINDS] + [f"p_all_{k}" for k in scoring.KINDS]].isna().all().all()
