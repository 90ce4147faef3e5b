"""The benchmarks' library parts that decide what they report, against hand-worked numbers: the
SmolLM2-vs-greedy comparison (headloc.benchmarks.vs_greedy, headloc.report.comparison), the landscape beside a
background (headloc.benchmarks.landscape), the ground-truth
benchmark (headloc.groundtruth.benchmark and .scoring) and the simulated searches' table
(headloc.search.simulate); each script run as a user runs it where it is cheap."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from headloc.benchmarks import landscape, vs_greedy
from headloc.data.datasets import identification_subset
from headloc.groundtruth import benchmark as gt
from headloc.groundtruth import scoring
from headloc.heads import HeadGeometry, head_name
from headloc.report.comparison import vs_greedy_table

REPO = Path(__file__).resolve().parents[2]


def script(name: str):
    """A benchmark script as a module: its ``main(argv)`` is what its command line runs."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ SmolLM2 against greedy


def test_the_smollm2_comparison_searches_the_workflows_identification_subset():
    docs = [{"id": str(i)} for i in range(107)]
    for seed in range(4):
        kept = [int(d["id"]) for d in identification_subset(docs, 20, seed)]  # rule subset_dataset's draw
        assert vs_greedy.identification_ids(107, 20, seed) == kept


def test_a_rerun_skips_the_searches_already_validated_and_runs_the_rest(tmp_path, tokenizer):
    """Each search's record is appended as it ends; run again on the same folder, the comparison
    runs only the methods with no validation record yet (a killed run resumes)."""
    from dataclasses import replace

    from conftest import tiny_llama

    model, lines = tiny_llama(len(tokenizer)), []
    task = {"lm_eval_task": "headloc_ioi", "n_docs": 6, "relative": True}  # shown in % of its unablated score
    search = {"id_docs": 3, "sparsity": 0.25, "alpha": 0.001}
    settings = vs_greedy.Comparison(methods=("random",), top_k=2, batch_size=8)
    vs_greedy.compare_seed(model, tokenizer, "ioi", task, search, 0, tmp_path, settings, log=lines.append)
    vs_greedy.compare_seed(model, tokenizer, "ioi", task, search, 0, tmp_path,
                           replace(settings, methods=("random", "greedy1s")), log=lines.append)
    records = vs_greedy.read_records([tmp_path])
    assert [(r["method"], r["n_docs"]) for r in records] == [("random", 6), ("greedy1s", 6)] and len(lines) == 2
    assert {(r["metric"], r["unit"]) for r in records} == {("acc,none", "relative")}  # ioi's YAML, the config


def test_a_record_names_what_the_search_found_each_head_by(tmp_path, tokenizer):
    """A screened greedy search's record keeps the labels of its top k, the head lists of its
    details (the pair, the heads displaced, set aside, screened, filled below the noise) and its pair
    probes, not its steps' measurements."""
    import re

    from conftest import tiny_llama

    task = {"lm_eval_task": "headloc_capitals", "n_docs": 6, "relative": False}
    search = {"id_docs": 3, "sparsity": 0.25, "alpha": 0.001}
    settings = vs_greedy.Comparison(methods=("screened_greedy",), top_k=3, batch_size=8)
    vs_greedy.compare_seed(tiny_llama(len(tokenizer)), tokenizer, "capitals", task, search, 0, tmp_path, settings,
                           log=lambda line: None)
    (record,) = vs_greedy.read_records([tmp_path])
    probes = record["details"].pop("probes")
    assert set(record["details"]) == {"set_aside", "screened", "displaced", "pair", "below_noise"}
    assert all(re.fullmatch(r"L\d+H\d+", head) for heads in record["details"].values() for head in heads)
    assert probes and all(len(probe["pair"]) == 2 and re.fullmatch(r"L\d+H\d+", probe["pair"][0]) for probe in probes)
    assert len(record["top_labels"]) == 3 and record["top_labels"][0].startswith(("chosen 1", "alone"))


def write_records(folder: Path, rows: list[dict]) -> None:
    """Records as the comparison's files hold them: one JSON object a line (written here by hand)."""
    with (folder / "ioi-s0.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def table_row(text: str, first_cells: str) -> list[str]:
    line = next(row for row in text.splitlines() if row.startswith(first_cells))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_smollm2_table_compares_each_seed_with_greedys(tmp_path):
    rows = [  # two seeds; accuracy 0.8 unablated
        ("greedy", 0, ["A", "B"], 100, 0.1), ("greedy", 1, ["A", "C"], 100, 0.2),
        ("group_testing", 0, ["A", "D"], 10, 0.3), ("group_testing", 1, ["C", "A"], 6, 0.2),
    ]
    write_records(tmp_path, [{"kind": "validation", "task": "ioi", "seed": seed, "method": method, "top": top,
                              "n_evals": evals, "seconds": 1.0, "clean": 0.8, "ablated": ablated, "metric": "acc,none"}
                             for method, seed, top, evals, ablated in rows])
    cells = table_row(vs_greedy_table(vs_greedy.read_records([tmp_path])), "| ioi | group_testing |")
    # Delta Task -50 and -60: mean -55, s.e. 5; minus greedy's: +20 and 0; overlap 1 and 2; 8 % of greedy's
    assert cells[2:9] == ["2", "-55.0 ± 5.0", "+10.0 ± 10.0", "1.5", "8", "8.0 %", "1.0"]
    assert cells[9] == "-"  # no filtered top k recorded


def test_the_smollm2_table_adds_the_searchs_continuous_score_in_its_own_unit(tmp_path):
    """A record with the search's own score on the full data (the ioi margin) gives rows "ioi (margin)":
    the change in margin, not 100 x it, against greedy's seed by seed."""
    rows = [("greedy", 0, 4.0, -3.0), ("greedy", 1, 4.0, -2.0), ("group_testing", 0, 4.0, 1.0),
            ("group_testing", 1, 4.5, 0.5)]
    write_records(tmp_path, [{"kind": "validation", "task": "ioi", "seed": seed, "method": method, "top": ["A"],
                              "n_evals": 10, "seconds": 1.0, "clean": 0.8, "ablated": 0.2, "id_metric": "margin",
                              "metric": "acc,none",
                              "id_clean": clean, "id_ablated": ablated, "id_filtered_ablated": ablated}
                             for method, seed, clean, ablated in rows])
    out = vs_greedy_table(vs_greedy.read_records([tmp_path]))
    cells = table_row(out, "| ioi (margin) | group_testing |")
    # changes -3 and -4: mean -3.5, s.e. 0.5; greedy's -7 and -6: gaps +4 and +2
    assert cells[2:5] == ["2", "-3.5 ± 0.5", "+3.0 ± 1.0"]
    assert table_row(out, "| ioi | group_testing |")[3] == "-60.0 ± 0.0"  # the accuracy rows stay


def test_a_task_validated_on_its_log_likelihood_is_shown_in_nats(tmp_path):
    """Records validated on a metric that is not a fraction (config/held-out-2.yaml's loglik) show its
    change as it is, on rows "<task> (<metric>)", never as 100 x it in percentage points."""
    rows = [("greedy", 0, -14.6), ("greedy", 1, -14.4), ("screened_greedy", 0, -14.0), ("screened_greedy", 1, -14.4)]
    write_records(tmp_path, [{"kind": "validation", "task": "past_tense", "seed": seed, "method": method, "top": ["A"],
                              "n_evals": 10, "seconds": 1.0, "clean": -0.3, "ablated": ablated,
                              "metric": "loglik,none"} for method, seed, ablated in rows])
    out = vs_greedy_table(vs_greedy.read_records([tmp_path]))
    # changes -13.7 and -14.1: mean -13.9, s.e. 0.2; greedy's -14.3 and -14.1: gaps +0.6 and 0
    assert table_row(out, "| past_tense (loglik,none) | screened_greedy |")[2:5] == ["2", "-13.9 ± 0.2", "+0.3 ± 0.3"]
    assert "| past_tense |" not in out


def test_a_relative_task_is_shown_in_percent_of_its_unablated_score_and_a_record_without_a_unit_is_refused(tmp_path):
    """A task the config names relative (swear's profane words) shows its change in percent of the
    unablated score, as Table 2 does; a record that names neither its metric nor its unit (written
    before records named them) is refused, not read as an accuracy."""
    write_records(tmp_path, [{"kind": "validation", "task": "swear", "seed": 0, "method": "greedy", "top": ["A"],
                              "n_evals": 10, "seconds": 1.0, "clean": 8.0, "ablated": 2.0, "metric": "profane_words",
                              "unit": "relative"}])
    out = vs_greedy_table(vs_greedy.read_records([tmp_path]))
    assert table_row(out, "| swear (% of unablated profane_words) | greedy |")[3] == "-75.0"  # 8 -> 2
    write_records(tmp_path, [{"kind": "validation", "task": "ioi", "seed": 0, "method": "greedy", "top": ["A"],
                              "n_evals": 10, "seconds": 1.0, "clean": 0.8, "ablated": 0.2}])
    with pytest.raises(ValueError, match=r"'ioi' seed 0 \('greedy'\) names no metric or unit"):
        vs_greedy_table(vs_greedy.read_records([tmp_path]))


def test_a_task_without_greedys_records_shows_no_gap_overlap_or_share(tmp_path):
    write_records(tmp_path, [{"kind": "validation", "task": "capitals", "seed": s, "method": "group_testing",
                              "top": ["A"], "n_evals": 50 + s, "seconds": 1.0, "clean": 0.8, "ablated": 0.2,
                              "unit": "points"} for s in (0, 1)])
    cells = table_row(vs_greedy_table(vs_greedy.read_records([tmp_path])), "| capitals | group_testing |")
    assert cells[2:8] == ["2", "-60.0 ± 0.0", "-", "-", "50", "-"]


def head_code(mask) -> int:
    """A score that names the ablated heads exactly: the sum of 2 ** index over them."""
    return int(sum(2 ** i for i in np.flatnonzero(mask)))


def test_a_validation_record_ablates_the_top_k_and_the_top_k_without_the_universal_heads():
    geometry = HeadGeometry(2, 3)  # L0H0..L1H2, indices 0..5
    found = vs_greedy.Searched(["L0H1", "L1H2", "L0H0", "L1H0"], 40, {"L0H1": "pair", "L1H0": "confirmed"},
                               {"pair": ["L0H1", "L1H2"]})
    calls = []

    def score(masks, desc):
        calls.append(desc)
        return np.array([head_code(m) for m in masks], dtype=float)

    settings = vs_greedy.Comparison(top_k=2, universal=("L0H1",))
    row = vs_greedy.validation_record(found, [score, lambda masks, desc: -np.asarray(masks).sum(1)], geometry,
                                      task="ioi", seed=3, label="group_testing", n_docs=50, seconds=2.5,
                                      settings=settings, metric="acc,none", id_metric="margin")
    assert row["clean"] == 0.0 and row["ablated"] == 2 ** 1 + 2 ** 5  # L0H1 and L1H2
    assert row["filtered_top"] == ["L1H2", "L0H0"] and row["filtered_ablated"] == 2 ** 5 + 2 ** 0
    assert row["labels"] == ["", ""] and row["universal"] == ["L0H1"]
    assert row["top_labels"] == ["pair", ""] and row["details"] == {"pair": ["L0H1", "L1H2"]}
    assert (row["id_clean"], row["id_ablated"], row["id_filtered_ablated"], row["id_metric"]) == (0, -2, -2, "margin")
    assert (row["task"], row["seed"], row["method"], row["n_evals"], row["n_docs"]) == ("ioi", 3, "group_testing", 40, 50)
    assert calls == ["validate ioi"]
    plain = vs_greedy.validation_record(found, [score], geometry, task="ioi", seed=3, label="x", n_docs=50,
                                        seconds=1.0, settings=vs_greedy.Comparison(top_k=2), metric="loglik,none")
    assert (row["metric"], row["unit"], plain["unit"]) == ("acc,none", "points", "own")
    relative = vs_greedy.validation_record(found, [score], geometry, task="swear", seed=3, label="x", n_docs=50,
                                           seconds=1.0, settings=vs_greedy.Comparison(top_k=2),
                                           metric="profane_words,none", relative=True)
    assert relative["unit"] == "relative"  # a task the config names relative, as Table 2 shows it
    assert "id_metric" not in plain and plain["filtered_top"] == ["L0H1", "L1H2"]


def test_records_written_by_the_comparison_make_its_table(tmp_path):
    geometry = HeadGeometry(2, 3)
    for method, top, evals in [("greedy", ["L0H0"], 7), ("random", ["L1H1"], 0)]:
        found = vs_greedy.Searched(top, evals)
        row = vs_greedy.validation_record(found, [lambda masks, desc: 1.0 - np.asarray(masks).sum(1) / 4], geometry,
                                          task="ioi", seed=0, label=method, n_docs=9, seconds=1.0,
                                          settings=vs_greedy.Comparison(top_k=1), metric="acc,none")
        vs_greedy.append_record(tmp_path / "ioi-s0.jsonl", row)
    cells = table_row(vs_greedy_table(vs_greedy.read_records([tmp_path])), "| ioi | random |")
    assert cells[2:8] == ["1", "-25.0", "+0.0", "0.0", "0", "0.0 %"]  # 1 -> 0.75 for both; no head shared


def test_the_comparison_refuses_a_task_its_config_lacks(tmp_path):
    config = {"tasks": {"ioi": {}, "capitals": {}}, "search": {}}
    with pytest.raises(ValueError, match=r"tasks \['iio'\] are not in the config; expected some of \['capitals', 'ioi'\]"):
        vs_greedy.compare(None, None, config, tmp_path, vs_greedy.Comparison(), tasks=["iio"])


@pytest.mark.parametrize("config, tasks", [("held-out.yaml", r"'antonyms', 'successor'"),
                                           ("held-out-2.yaml", r"'past_tense', 'plural'"),
                                           ("held-out-3.yaml", r"'comparative', 'language'"),
                                           ("held-out-4.yaml", r"'continent', 'first_letter'")])
def test_the_script_compares_on_the_tasks_of_the_config_it_is_given(config, tasks, tmp_path, tiny_model_dir):
    """--config config/held-out.yaml: the held-out tasks are the ones the comparison knows."""
    with pytest.raises(ValueError, match=rf"tasks \['ioi'\] are not in the config; expected some of \[{tasks}\]"):
        script("smollm2_vs_greedy").main(["--config", str(REPO / "config" / config), "--model", str(tiny_model_dir),
                                          "--tasks", "ioi", "--out", str(tmp_path)])


def test_the_script_prints_the_table_of_its_records(tmp_path, capsys):
    write_records(tmp_path, [{"kind": "validation", "task": "ioi", "seed": 0, "method": m, "top": ["A"],
                              "n_evals": n, "seconds": 1.0, "clean": 0.8, "ablated": a, "metric": "acc,none"}
                             for m, n, a in (("greedy", 100, 0.2), ("cs_adaptive", 50, 0.5))])
    script("smollm2_vs_greedy").main(["--table", str(tmp_path)])
    cells = table_row(capsys.readouterr().out, "| ioi | cs_adaptive |")
    assert cells[2:8] == ["1", "-30.0", "+30.0", "1.0", "50", "50.0 %"]


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
    at_goal = recall_rows()
    at_goal.loc[at_goal["budget"] == 75, "recall"] = scoring.GOAL_RECALL  # mean recall exactly at the goal: met
    assert scoring.budget_fit(at_goal).iloc[0]["masks_at_goal"] == 50


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
    assert np.isnan(plain["universal_found"]) and np.isnan(plain["pair_found"])  # none planted: not "found"


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


# ------------------------------------------------------------------ the ground-truth benchmark's runs


def test_each_method_runs_at_its_budgets_and_seeds():
    budgets, seeds = [50, 100], [0, 1, 2]
    assert gt.runs_of("greedy", budgets, seeds) == [(None, 0)]  # deterministic, spends no budget
    assert gt.runs_of("greedy1s", budgets, seeds) == [(None, 0)]
    assert gt.runs_of("attribution", budgets, seeds) == [(None, 0), (None, 1), (None, 2)]  # seeded, no budget
    assert gt.runs_of("random", budgets, seeds) == [(None, 0), (None, 1), (None, 2)]
    grid = [(50, 0), (50, 1), (50, 2), (100, 0), (100, 1), (100, 2)]
    assert gt.runs_of("cs_adaptive", budgets, seeds) == grid
    assert gt.runs_of("thompson_damage", budgets, seeds) == grid  # a variant runs as its method


def test_a_variant_is_its_method_with_the_benchmarks_options():
    method, options = gt.method_of("thompson_damage")
    assert method.name == "thompson" and options == {"score_range": [-3.0, 0.0], "reward": "damage"}
    assert gt.method_of("group_testing")[1] == {}
    method, options = gt.method_of("conditional_screen")
    assert method.name == "conditional_group_testing" and options == {"pair_screen": True}
    assert method.options_of(options).pair_screen
    with pytest.raises(ValueError, match="unknown method 'greedy2'; expected one of attribution, .*thompson_damage"):
        gt.method_of("greedy2")


def test_the_report_writes_the_rows_the_summary_and_the_figure(tmp_path):
    table = recall_rows()
    text = gt.report(table, tmp_path, 0.05)
    assert (tmp_path / "summary.md").read_text() == text
    assert pd.read_csv(tmp_path / "recall.csv").shape == table.shape
    assert (tmp_path / "recall.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    goal = text.split("## Cheapest budget")[1].split("##")[0].strip().splitlines()
    header = [cell.strip() for cell in goal[2].strip("|").split("|")]
    cells = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in goal[4:]]
    # group testing's cheapest cell at the goal is budget 100 (test_the_goal_cell_is_...), 60 evaluations
    assert [(c["method"], c["budget"], c["n_evals"]) for c in cells] == [("greedy", "nan", "200"),
                                                                          ("group_testing", "100", "60")]
    assert text.rstrip().endswith("Tasks left out (certificate failing): c64-s0/bad, c64-s1/bad")


def test_the_script_merges_earlier_runs(tmp_path, capsys):
    halves = [recall_rows().iloc[:7], recall_rows().iloc[7:]]
    for i, half in enumerate(halves):
        half.to_csv(tmp_path / f"r{i}.csv", index=False)
    script("ground_truth").main(["--merge", str(tmp_path / "r0.csv"), str(tmp_path / "r1.csv"), "--out",
                                 str(tmp_path / "merged")])
    merged = pd.read_csv(tmp_path / "merged" / "recall.csv")
    assert len(merged) == len(recall_rows()) and capsys.readouterr().out.startswith("# Recall of the certified")
    assert (tmp_path / "merged" / "summary.md").read_text() == gt.report(recall_rows(), tmp_path / "again", 0.05)


def test_the_benchmark_refuses_a_task_the_truth_lacks(tmp_path):
    (tmp_path / "truth.json").write_text(json.dumps({"tasks": {"copy3": {}}}))
    with pytest.raises(ValueError, match=r"tasks \['copy4'\] are not in .*truth.json; expected some of \['copy3'\]"):
        gt.benchmark(tmp_path, ["greedy"], [], [0], sparsity=0.05, alpha="cv", tasks=["copy4"])


# ------------------------------------------------------------------ the simulated searches


def test_the_simulated_searches_table_by_hand():
    from headloc.search.simulate import recall_table

    text = recall_table({"lasso_stratified": {50: [1.0, 0.5, 0.0], 100: [1.0]}, "group_testing": {50: [1.0, 1.0, 1.0],
                                                                                                  100: [0.5]}}, [50, 100])
    lines = text.splitlines()
    assert lines[0] == "| search | M = 50 | M = 100 |"
    # 1, 0.5, 0: mean 0.5, s.d. 0.5, s.e. 0.29; one of three all found
    assert lines[2] == "| lasso_stratified | 0.50 +- 0.29 [0.33] | 1.00 +- 0.00 [1.00] |"
    assert lines[3] == "| group_testing | 1.00 +- 0.00 [1.00] | 0.50 +- 0.00 [0.00] |"


def test_the_simulation_script_prints_the_comparison(capsys):
    from headloc.search.simulate import compare, recall_table

    script("simulate_search").main(["--seeds", "2", "--n-heads", "48", "--budgets", "30"])
    out = capsys.readouterr().out
    assert recall_table(compare(range(2), [30], n_heads=48), [30]) in out
    assert "N = 48, tau = 0.01, OR pair: False, sparsity 0.05, seeds 0..1" in out


# ------------------------------------------------------------------ greedy's question measured whole


LANDSCAPE_GEOMETRY = HeadGeometry(4, 8)  # 32 heads


def additive(effect: np.ndarray, interaction=None):
    """score_sets for a score of 1 - the sum of the ablated heads' effects (``interaction(set)``: more)."""
    def score_sets(head_sets):
        return [1.0 - effect[list(s)].sum() - (interaction(set(s)) if interaction else 0.0) for s in head_sets]
    return score_sets


def test_every_head_s_drop_beside_the_background_and_the_best_head_s_group_rank():
    effect = np.zeros(32)
    effect[[5, 9, 10, 11, 12]] = [1.0, 0.45, 0.4, 0.35, 0.3]  # four middling heads: a group of them beats the best
    effect[[20, 21]] = [-0.25, -0.5]  # their ablation raises the score
    record = landscape.measure(additive(effect), LANDSCAPE_GEOMETRY, [0], group_sizes=(8, 1), partitions=3, seed=4)
    assert record["base"] == pytest.approx(1.0) and "0" not in record["drops"]
    assert {int(h): d for h, d in record["drops"].items()} == pytest.approx({h: effect[h] for h in range(1, 32)})
    found = landscape.summarise(record)
    assert found["best"] == (5, pytest.approx(1.0)) and found["runner_up"] == (9, pytest.approx(0.45))
    assert found["raising"] == 2 and found["raised"] == pytest.approx(-0.75)
    assert found["lowered"] == pytest.approx(2.5)
    for part, summary in zip(record["partitions"], found["partitions"]):
        sums = [effect[g].sum() for g in part["groups"]]  # the planted drops, not the record's
        holder = next(sums[i] for i, g in enumerate(part["groups"]) if 5 in g)
        assert sorted(h for g in part["groups"] for h in g) == list(range(1, 32))
        assert summary["rank"] == sum(s > holder for s in sums)
        assert summary["additive"] == pytest.approx(1.0)
    singles = [p for p in found["partitions"] if p["group_size"] == 1]
    assert [p["rank"] for p in singles] == [0, 0, 0] and singles[0]["largest"] == pytest.approx(1.0)
    ranks = [p["rank"] for p in found["partitions"] if p["group_size"] == 8]
    assert any(rank > 0 for rank in ranks)  # 9-12 in one group of 8 outweigh head 5 (1.5 > 1.0 with 20, 21 apart)


def test_the_background_is_ablated_under_every_set():
    """A backup head (16 counts only once 3 is ablated): beside 3 it is the best head."""
    effect = np.zeros(32)
    effect[[3, 7]] = [1.0, 0.5]
    backup = additive(effect, interaction=lambda s: 0.8 if {3, 16} <= s else 0.0)
    assert landscape.summarise(landscape.measure(backup, LANDSCAPE_GEOMETRY, [], group_sizes=(4,)))["best"][0] == 3
    record = landscape.measure(backup, LANDSCAPE_GEOMETRY, [3], group_sizes=(4,), partitions=1)
    beside = landscape.summarise(record)
    assert beside["best"] == (16, pytest.approx(0.8)) and beside["runner_up"] == (7, pytest.approx(0.5))
    (part,) = record["partitions"]  # each group too is ablated beside 3: the one holding 16 drops by 0.8 more
    assert part["drops"] == pytest.approx([effect[g].sum() + 0.8 * (16 in g) for g in part["groups"]])
    assert beside["partitions"][0]["rank"] == 0


def test_the_script_measures_a_checkpoint_beside_its_background_and_prints_the_table(tmp_path, tiny_model_dir,
                                                                                     tokenizer, capsys):
    """Through the script's command line on a tiny model; the drops checked against copies of the
    model whose heads are zeroed in the weights, scored unablated."""
    import yaml

    from conftest import zeroed_copy

    from headloc.api.tasks import mask_scorer, resolve_task
    from headloc.benchmarks.vs_greedy import identification_ids
    from headloc.model.loading import load_model

    run = script("conditional_landscape")
    args = ["--model", str(tiny_model_dir), "--background", "L0H1", "--seeds", "3", "--group-sizes", "2",
            "--partitions", "1", "--batch-size", "8", "--out", str(tmp_path)]
    run.main(args)
    path = tmp_path / "ioi-s3.json"
    record, stamp = landscape.read_records([tmp_path])[0], path.stat().st_mtime_ns
    assert record["task"] == "ioi" and record["background"] == [1] and len(record["drops"]) == 7
    assert [len(p["groups"]) for p in record["partitions"]] == [4]

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    task, data = config["tasks"]["ioi"], {"n_docs": config["tasks"]["ioi"]["n_docs"], "seed": 3}
    ids = identification_ids(task["n_docs"], config["search"]["id_docs"], 3)
    model, _ = load_model(str(tiny_model_dir), device="cpu")
    resolved = resolve_task(task["id_task"], metric=task["id_metric"], documents=ids, dataset_kwargs=data)

    def unablated(heads):
        mask = np.zeros(8, dtype=np.int8)
        mask[heads] = 1
        score = mask_scorer(resolved, zeroed_copy(model, mask), tokenizer, batch_size=8, masks_per_pass=1,
                            progress=False)
        return score(np.zeros((1, 8), dtype=np.int8))[0]

    base = unablated([1])
    assert record["base"] == pytest.approx(base, abs=1e-4)
    assert record["drops"]["6"] == pytest.approx(base - unablated([1, 6]), abs=1e-4)

    run.main(args)  # a rerun finds the record and measures nothing
    assert path.stat().st_mtime_ns == stamp
    capsys.readouterr()
    run.main(["--table", str(tmp_path)])
    best = landscape.summarise(record)["best"][0]
    cells = table_row(capsys.readouterr().out, "| ioi | 3 |")
    assert cells[2] == "L0H1" and cells[3].startswith(f"L{best // 4}H{best % 4} (")


def test_the_scorer_turns_a_lower_is_better_score_so_that_higher_is_better():
    """A callable task's value under each set, against copies of the model with those heads zeroed
    in the weights: as it is when higher is better, negated when it is declared lower-is-better."""
    import torch

    from conftest import tiny_llama, zeroed_copy
    from headloc.api.tasks import resolve_task

    model = tiny_llama(64)
    logit = lambda m: float(m(torch.tensor([[5, 6, 7]])).logits[0, -1, 3].detach())
    sets = [[], [2], [2, 5]]
    expected = [logit(zeroed_copy(model, np.isin(np.arange(8), heads).astype(int))) for heads in sets]
    assert len(set(expected)) == 3
    for direction, sign in ((True, 1.0), (False, -1.0)):
        score_sets = landscape.task_scorer(model, None, resolve_task(logit, higher_is_better=direction))
        assert score_sets(sets) == pytest.approx([sign * value for value in expected], abs=1e-5)


def test_the_script_refuses_a_task_the_config_lacks(tmp_path):
    with pytest.raises(SystemExit):
        script("conditional_landscape").main(["--task", "iio", "--out", str(tmp_path)])



def test_the_guided_greedy_script_records_its_heads_as_the_comparison_does(tmp_path, tiny_model_dir, tokenizer,
                                                                            capsys):
    """benchmarks/guided_greedy.py on a tiny model: a record the comparison's table reads, whose
    first head's drop is the margin lost when that head is zeroed in a copy's weights; a rerun
    skips it."""
    import yaml

    from conftest import zeroed_copy
    from headloc.api.tasks import mask_scorer, resolve_task
    from headloc.heads import head_index
    from headloc.model.loading import load_model

    args = ["--model", str(tiny_model_dir), "--tasks", "ioi", "--seeds", "1", "--top-k", "2", "--m", "2",
            "--m-abs", "1", "--carry", "1", "--batch-size", "8", "--out", str(tmp_path)]
    script("guided_greedy").main(args)
    (row,) = vs_greedy.read_records([tmp_path])
    assert row["method"] == "guided_greedy" and len(row["top"]) == 2 and row["gradient_passes"] == 2
    assert 2 <= row["n_evals"] <= 1 + 2 * 4 and row["n_docs"] == 100

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    task, data = config["tasks"]["ioi"], {"n_docs": config["tasks"]["ioi"]["n_docs"], "seed": 1}
    ids = vs_greedy.identification_ids(task["n_docs"], config["search"]["id_docs"], 1)
    scored = resolve_task(task["id_task"], metric=task["id_metric"], documents=ids, dataset_kwargs=data)
    model, _ = load_model(str(tiny_model_dir), device="cpu")
    first = np.zeros(8, dtype=np.int8)
    first[head_index(row["top"][0], 2, 4)] = 1
    margin = [mask_scorer(scored, copy, tokenizer, batch_size=8, masks_per_pass=1, progress=False)(
        np.zeros((1, 8), dtype=np.int8))[0] for copy in (model, zeroed_copy(model, first))]
    assert row["drops"][0] == pytest.approx(margin[0] - margin[1], abs=1e-4)
    # the second step's list opens with the m heads attribution ranks first on a copy with the first
    # head zeroed in its weights (beside it, without any gate at 0)
    from headloc.engine.supervision import task_examples
    from headloc.search.attribution import attribution

    gold = resolve_task(task["lm_eval_task"], documents=ids, dataset_kwargs=data)
    effects = attribution(zeroed_copy(model, first), task_examples(tokenizer, gold.spec,
                                                                  include_path=gold.task_folders)).effects
    effects[np.flatnonzero(first)] = np.inf
    assert row["lists"][1][:2] == [f"L{h // 4}H{h % 4}" for h in np.argsort(effects, kind="stable")[:2]]

    script("guided_greedy").main(args)
    assert len(vs_greedy.read_records([tmp_path])) == 1
    capsys.readouterr()
    script("smollm2_vs_greedy").main(["--table", str(tmp_path)])
    assert table_row(capsys.readouterr().out, "| ioi | guided_greedy |")[2] == "1"


def test_a_rerun_asking_another_measurement_than_the_kept_record_is_refused(tmp_path, tiny_model_dir):
    """A landscape record of another background or group sizes, or a guided record of other options,
    is not skipped as if it answered the new question."""
    flat = landscape.measure(additive(np.zeros(8)), HeadGeometry(2, 4), [1], group_sizes=(2,), partitions=1)
    landscape.write_record(tmp_path / "land" / "ioi-s3.json", flat)
    base = ["--model", str(tiny_model_dir), "--seeds", "3", "--partitions", "1", "--out", str(tmp_path / "land")]
    for other in (["--background", "L0H2", "--group-sizes", "2"], ["--background", "L0H1", "--group-sizes", "4"]):
        with pytest.raises(SystemExit):
            script("conditional_landscape").main(base + other)
    script("conditional_landscape").main(base + ["--background", "L0H1", "--group-sizes", "2"])  # the same: skipped

    row = {"kind": "validation", "task": "ioi", "seed": 0, "method": "guided_greedy", "top": ["L0H1", "L1H2"],
           "options": {"m": 10, "m_abs": 10, "carry": 0}}  # the method's defaults
    (tmp_path / "guided").mkdir()
    vs_greedy.append_record(tmp_path / "guided" / "ioi-s0.jsonl", row)
    guided = ["--model", str(tiny_model_dir), "--tasks", "ioi", "--seeds", "0", "--out", str(tmp_path / "guided")]
    for other in (["--top-k", "2", "--carry", "3"], ["--top-k", "3"]):
        with pytest.raises(SystemExit):
            script("guided_greedy").main(guided + other)
    script("guided_greedy").main(guided + ["--top-k", "2"])  # the same: skipped, nothing appended
    assert len(vs_greedy.read_records([tmp_path / "guided"])) == 1


def test_the_benchmarks_default_model_is_the_demo_configs_model_where_the_workflow_converts_it(tmp_path,
                                                                                                  tiny_model_dir):
    from headloc.benchmarks.vs_greedy import demo_checkpoint

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "demo.yaml").write_text((REPO / "config" / "demo.yaml").read_text())
    converted = tmp_path / "results" / "models" / "smollm2-135m"  # rule prepare_model's folder for the demo's model
    converted.parent.mkdir(parents=True)
    converted.symlink_to(tiny_model_dir)
    assert demo_checkpoint(tmp_path) == converted


def test_the_comparison_reads_its_config_as_the_workflow_does(tmp_path):
    """The schema's defaults filled in (held-out.yaml names no task `relative`), its errors raised."""
    config = vs_greedy.read_config(REPO / "config" / "held-out.yaml", REPO)
    assert {name: task["relative"] for name, task in config["tasks"].items()} == {"antonyms": False, "successor": False}
    bad = yaml.safe_load((REPO / "config" / "held-out.yaml").read_text())
    bad["tasks"]["antonyms"]["relative"] = "yes"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ValueError, match="relative"):
        vs_greedy.read_config(tmp_path / "bad.yaml", REPO)
