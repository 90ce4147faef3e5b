"""The benchmarks that read finished workflow runs back (headloc.workflow.benchmark_runs): the
search-efficiency summary of a run's Table 4 (headloc.report.efficiency's tables) and the
comparison of two runs of one config (headloc.report.comparison.score_agreement), each on a run
folder laid out as the workflow writes it, against hand-worked numbers, and through its script."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from headloc.report.comparison import score_agreement
from headloc.report.efficiency import curve_table, efficiency_points, percent, smallest_budgets, summary_table
from headloc.workflow.benchmark_runs import compare_runs, read_universal, run_plan, variant_config, write_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "config" / "schema.yaml"


def script(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cells(text: str, start: str) -> list[str]:
    line = next(row for row in text.splitlines() if row.startswith(start))
    return [cell.strip() for cell in line.strip("|").split("|")]


# ------------------------------------------------------------------ search efficiency


def test_the_config_as_run_has_the_seeds_the_methods_and_the_budgets_asked_for():
    config = yaml.safe_load((REPO / "config" / "methods.yaml").read_text())
    given = copy.deepcopy(config)
    run = variant_config(config, 3, ["greedy", "chg"], n_masks=50, budgets=[25])
    assert run["search"]["repeats"] == 3 and run["search"]["n_masks"] == 50 and run["search"]["budgets"] == [25]
    # the main method (validation.method, default cs_stratified) stays beside the ones asked for
    assert run["search"]["methods"] == ["cs_stratified", "greedy", "chg"]
    assert config == given  # the config given is kept
    assert variant_config(config, 5)["search"]["methods"] == config["search"]["methods"]


def efficiency_config(universal: dict) -> dict:
    return {"models": {"m": {"source": "x"}},
            "tasks": {"ioi": {"lm_eval_task": "headloc_ioi"}, "capitals": {"lm_eval_task": "headloc_capitals"}},
            "search": {"methods": ["cs_stratified", "greedy"], "n_masks": 50, "budgets": [25], "repeats": 2,
                       "id_docs": 20},
            "universal": universal}


def efficiency_run(where: Path, universal: dict) -> None:
    """A finished run as the benchmark leaves it: its config and its Table 4. Greedy -80 at 1,000
    evaluations on both tasks; cs_stratified at 25 masks -40 and -80 (mean 75 % of greedy's), at 50
    masks -80 and -72 (mean -76: 95 %)."""
    config_file = write_config(where, efficiency_config(universal))
    plan = run_plan(config_file, SCHEMA)
    rows = []
    for task in ("ioi", "capitals"):
        for search in plan.searches[task]:
            spec = plan.search(task, search)
            if spec.method == "greedy":
                n_evals, delta = 1000, -80.0
            else:
                n_evals = spec.n_masks
                delta = {(25, 0): -40.0, (25, 1): -80.0, (50, 0): -80.0, (50, 1): -72.0}[(spec.n_masks, spec.repeat)]
            rows.append({"capability": task, "model": "m", "task": task, "method": spec.method, "search": search,
                         "n_evals": n_evals, "k": 5, "delta_task": delta})
    (where / "results" / "tables").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(where / "results" / "tables" / "table4.csv", index=False)


def test_the_script_sums_up_a_finished_run(tmp_path, capsys):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mine.yaml").write_text("{}")  # --no-run reads the config left beside the run
    efficiency_run(tmp_path / "work" / "mine", {"filter": False})
    script("search_efficiency").main(["--no-run", "--configs", str(tmp_path / "configs" / "mine.yaml"),
                                      "--workdir", str(tmp_path / "work")])
    text = (tmp_path / "work" / "search_efficiency.md").read_text()
    assert text.strip() in capsys.readouterr().out
    curve, smallest = text.split("Smallest budget")
    # s.d. of -80 and -72: 5.66; -80 reaches 95 % of greedy's (-76), -72 does not; 50 / 1,000 evaluations
    assert cells(smallest, "| m | ioi | cs_stratified |") == [
        "m", "ioi", "cs_stratified", "task", "50", "50", "-76.0 +- 5.7 (-80.0)", "1/2", "0.050", "no"]
    assert cells(curve, "| m | ioi | cs_stratified | task | 25 |")[6:] == ["2", "-60.0 +- 28.3", "-80..-40", "75%", "1/2"]
    assert cells(smallest, "| m | capitals | greedy |")[4:] == ["1000", "1000", "-80.0 (-80.0)", "1/1", "1.000", "no"]
    record = json.loads((tmp_path / "work" / "search_efficiency.json").read_text())
    assert record["seeds"] == 5 and record["universal"] == {"mine": {}}
    assert {(r["task"], r["method"], r["budget"]) for r in record["smallest_budgets"]} == {
        ("ioi", "cs_stratified", 50), ("ioi", "greedy", 1000), ("capitals", "cs_stratified", 50),
        ("capitals", "greedy", 1000)}


def test_a_missing_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no benchmark-config.yaml at .*nothing/benchmark-config.yaml"):
        script("search_efficiency").main(["--no-run", "--configs", str(tmp_path / "nothing.yaml"),
                                          "--workdir", str(tmp_path)])


def test_the_universal_heads_are_read_as_the_workflow_found_them(tmp_path):
    """Table 4's universal heads are each model's universal_heads.json (rule universal_heads: measured,
    ranked or given), not recomputed from the rankings; none when the filter is off."""
    plan = run_plan(write_config(tmp_path, efficiency_config({"filter": True})), SCHEMA)
    (tmp_path / "results" / "m").mkdir(parents=True)
    (tmp_path / "results" / "m" / "universal_heads.json").write_text(json.dumps({"model": "m", "heads": ["L1H5", "L2H2"]}))
    assert read_universal(tmp_path, plan) == {"m": ["L1H5", "L2H2"]}
    assert read_universal(tmp_path, run_plan(write_config(tmp_path, efficiency_config({"filter": False})), SCHEMA)) == {}
    (tmp_path / "results" / "m" / "universal_heads.json").unlink()
    with pytest.raises(FileNotFoundError, match="universal_heads.json"):
        read_universal(tmp_path, plan)


def test_the_efficiency_tables_by_hand():
    t4 = pd.DataFrame({"model": "m", "task": "t", "k": 5, "method": ["greedy", "cs_adaptive", "cs_adaptive", "attribution"],
                       "budget": [None, 25, 25, None], "repeat": [0, 0, 1, 0], "y": ["task", "margin", "margin", "task"],
                       "n_evals": [1000, 20, 25, 3], "delta_task": [-80.0, -80.0, -78.0, -20.0]})
    points = efficiency_points(t4)
    curve = curve_table(points)
    # mean -79 (99 %), s.d. 1.41, evaluations (20 + 25) / 2 = 22.5, printed 22
    assert cells(curve, "| m | t | cs_adaptive |") == ["m", "t", "cs_adaptive", "margin", "25", "22", "2",
                                                       "-79.0 +- 1.4", "-80..-78", "99%", "2/2"]
    summary = summary_table(smallest_budgets(points), 0.95, 0.05)
    assert cells(summary, "| m | t | cs_adaptive |")[4:] == ["25", "22", "-79.0 +- 1.4 (-80.0)", "2/2", "0.022", "yes"]
    assert cells(summary, "| m | t | attribution |")[4:] == ["none (best 25%)", "3", "-20.0 (-80.0)", "0/1", "-", "no"]
    assert "smallest budget at 95% of greedy" in summary and "<= 5%?" in summary
    assert (percent(float("nan")), percent(-0.001), percent(0.994)) == ("-", "0%", "99%")


# ------------------------------------------------------------------ two runs of one config


def test_score_agreement_by_hand():
    got = score_agreement([0.0, 1.0, 2.0, 3.0], [0.0, 1.1, 2.0, 2.8], ["L0H0", "L1H1"], ["L1H1", "L2H2"])
    assert got["masks"] == 4 and got["max_diff"] == pytest.approx(0.2) and got["mean_diff"] == pytest.approx(0.075)
    assert got["spread"] == pytest.approx(np.sqrt(1.25))  # the standard deviation of 0, 1, 2, 3
    assert got["max_diff_per_spread"] == pytest.approx(0.2 / np.sqrt(1.25))
    assert got["spearman"] == pytest.approx(1.0)  # the same order
    assert got["top_overlap"] == 1 and got["top1_same"] is False
    assert score_agreement([3.0, 1.0, 2.0], [1.0, 3.0, 2.0], [], [])["spearman"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="the same masks .* got 3 and 2"):
        score_agreement([0.0, 1.0, 2.0], [0.0, 1.0], [], [])


def write_search(run: Path, search: str, scores: list[float], top: list[str]) -> None:
    """A search as the workflow leaves it: its recovery and its stage-1 scores in two chunks (the
    second chunk's file first by name, so mask order must come from the tables)."""
    folder = run / "results" / "m" / "ioi" / search
    (folder / "scores").mkdir(parents=True)
    (folder / "recovery.json").write_text(json.dumps({"top_heads": top, "ranking": top}))
    half = len(scores) // 2
    for name, masks in (("1", range(half)), ("0", range(half, len(scores)))):
        pd.DataFrame({"mask": list(masks), "score": [scores[i] for i in masks], "higher_is_better": True}).to_csv(
            folder / "scores" / f"{name}.tsv", sep="\t", index=False)


def test_two_runs_compare_the_searches_they_share(tmp_path, capsys):
    write_search(tmp_path / "a", "cs_s0", [0.0, 1.0, 2.0, 3.0], ["L0H0", "L1H1"])
    write_search(tmp_path / "b", "cs_s0", [0.0, 1.1, 2.0, 2.8], ["L1H1", "L2H2"])
    write_search(tmp_path / "a", "only_in_a", [0.0, 1.0], ["L0H0"])
    rows = compare_runs(tmp_path / "a", tmp_path / "b", masks=3)
    assert list(rows) == ["m/ioi/cs_s0"]
    assert rows["m/ioi/cs_s0"]["max_diff"] == pytest.approx(0.1) and rows["m/ioi/cs_s0"]["masks"] == 3
    out = tmp_path / "agreement.json"
    assert script("dtype_compare").main([str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out)]) == 0
    written = json.loads(out.read_text())["m/ioi/cs_s0"]
    assert written["masks"] == 4  # --masks 16 (the default) of a 4-mask design: all 4
    assert written["max_diff"] == pytest.approx(0.2) and written["top_b"] == ["L1H1", "L2H2"]
    assert "m/ioi/cs_s0" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        script("dtype_compare").main([str(tmp_path / "a"), str(tmp_path / "nothing")])
    assert "share no search with a recovery.json" in capsys.readouterr().err
