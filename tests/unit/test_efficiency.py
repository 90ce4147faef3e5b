"""headloc.report.efficiency: the budget at which a method reaches greedy, against hand-computed sums."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from headloc.workflow.schema import validate_config
from headloc.workflow.plan import Plan
from headloc.report.efficiency import efficiency_points, search_fields, smallest_budgets, with_search_fields

SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


def plan_of(config):
    validate_config(config, SCHEMA)
    return Plan(config)


def table4(rows):
    """Rows of (model, task, method, search, n_evals, delta_task, budget, repeat, y)."""
    return pd.DataFrame(rows, columns=["model", "task", "method", "search", "n_evals", "delta_task",
                                       "budget", "repeat", "y"])


def test_search_fields_come_from_the_plan():
    plan = plan_of({"models": {"m": {"source": "x"}},
                    "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "id_task": "headloc_ioi_margin",
                                      "id_metric": "margin"},
                              "capitals": {"lm_eval_task": "headloc_capitals"}},
                    "search": {"methods": ["cs_stratified", "cs_adaptive", "greedy", "chg"], "n_masks": 200,
                               "budgets": [25], "repeats": 3, "id_docs": 20},
                    "chg": {"seeds": 2, "steps": 25}})
    fields = {(task, search): search_fields(plan, task, search)
              for task in plan.searches for search in plan.searches[task]}
    margin = "_yheadloc_ioi_margin-margin"
    assert fields[("ioi", f"cs_stratified_m25of200_p0.05_n20_s0{margin}_r2")] == {
        "budget": 25, "repeat": 2, "y": "margin"}
    assert fields[("ioi", f"cs_adaptive_m25_p0.05_n20_s0{margin}_r1")] == {"budget": 25, "repeat": 1, "y": "margin"}
    assert fields[("ioi", f"greedy_k5_xu_n20_s0{margin}")] == {"budget": None, "repeat": 0, "y": "margin"}
    # the gradient methods differentiate the gold log-likelihood whatever the id_task: no y
    assert fields[("ioi", "chg_x2_l0.1_t25_n20_s0")] == {"budget": None, "repeat": 0, "y": "task"}
    assert fields[("capitals", "cs_stratified_m200_p0.05_n20_s0_r1")] == {
        "budget": 200, "repeat": 1, "y": "task"}
    assert fields[("capitals", "greedy_k5_xu_n20_s0")] == {"budget": None, "repeat": 0, "y": "task"}
    assert len(fields) == 2 * (3 * 2 + 3 * 2 + 2)  # per task: 3 repeats x (200, 25) of each CS method, greedy, chg
    table = with_search_fields(pd.DataFrame({"task": ["ioi", "capitals"], "search": [
        f"cs_adaptive_m200_p0.05_n20_s0{margin}", "greedy_k5_xu_n20_s0"]}), plan)
    assert table["budget"].iloc[0] == 200 and np.isnan(table["budget"].iloc[1])
    assert table[["repeat", "y"]].values.tolist() == [[0, "margin"], [0, "task"]]
    with pytest.raises(KeyError, match="cs_bernoulli_m200_p0.05_n20_s0"):  # a Table 4 of another config
        search_fields(plan, "capitals", "cs_bernoulli_m200_p0.05_n20_s0")


def test_points_and_smallest_budgets_by_hand():
    rows = [("m", "ioi", "greedy", "greedy_k5_xu_n20_s0", 1337, -68.0, None, 0, "task"),
            ("m", "ioi", "attribution", "attribution_n20_s0", 3, -34.0, None, 0, "task"),
            # cs_adaptive M = 25: three seeds, one settled early (20 evaluations instead of 25)
            ("m", "ioi", "cs_adaptive", "cs_adaptive_m25_p0.05_n20_s0_yx-margin", 25, -60.0, 25, 0, "margin"),
            ("m", "ioi", "cs_adaptive", "cs_adaptive_m25_p0.05_n20_s0_yx-margin_r1", 20, -68.0, 25, 1, "margin"),
            ("m", "ioi", "cs_adaptive", "cs_adaptive_m25_p0.05_n20_s0_yx-margin_r2", 25, -70.0, 25, 2, "margin"),
            ("m", "ioi", "cs_adaptive", "cs_adaptive_m50_p0.05_n20_s0_yx-margin", 50, -68.0, 50, 0, "margin"),
            ("m", "ioi", "cs_stratified", "cs_stratified_m100_p0.05_n20_s0", 100, -20.0, 100, 0, "task"),
            ("m", "ioi", "cs_stratified", "cs_stratified_m100_p0.05_n20_s0_r1", 100, -40.0, 100, 1, "task"),
            ("m", "cap", "greedy", "greedy_k5_xu_n20_s0", 1300, -80.0, None, 0, "task"),
            ("m", "cap", "cs_stratified", "cs_stratified_m100_p0.05_n20_s0", 100, -80.0, 100, 0, "task")]
    points = efficiency_points(table4(rows))
    adaptive25 = points[(points["method"] == "cs_adaptive") & (points["budget"] == 25)].iloc[0]
    deltas = np.array([-60.0, -68.0, -70.0])
    assert adaptive25["y"] == "margin" and adaptive25["seeds"] == 3
    assert adaptive25["mean"] == pytest.approx(deltas.mean())
    assert adaptive25["sd"] == pytest.approx(deltas.std(ddof=1))
    assert adaptive25["n_evals"] == pytest.approx(70 / 3)
    assert adaptive25["share_of_greedy"] == pytest.approx(deltas.mean() / -68.0, abs=1e-6)
    assert adaptive25["seeds_reaching"] == 2  # -68 and -70 are at least 0.95 x -68 = -64.6
    best = smallest_budgets(points).set_index(["task", "method"])
    # cs_adaptive's mean at 25 is 97 % of greedy's: budget 25, ratio (70 / 3) / 1337
    assert best.loc[("ioi", "cs_adaptive"), "budget"] == 25
    assert best.loc[("ioi", "cs_adaptive"), "ratio_to_greedy"] == pytest.approx(70 / 3 / 1337, abs=1e-6)
    # never reached: no budget, the best share kept (attribution: 34 / 68)
    assert np.isnan(best.loc[("ioi", "attribution"), "budget"])
    assert best.loc[("ioi", "attribution"), "share_of_greedy"] == pytest.approx(0.5)
    assert np.isnan(best.loc[("ioi", "cs_stratified"), "ratio_to_greedy"])
    # greedy is its own reference on every task
    assert best.loc[("cap", "greedy"), "ratio_to_greedy"] == 1.0
    assert best.loc[("cap", "cs_stratified"), "ratio_to_greedy"] == pytest.approx(100 / 1300, abs=1e-6)


def test_a_task_without_greedy_is_refused_by_name():
    rows = [("m", "ioi", "greedy", "greedy_k5_n20_s0", 1337, -68.0, None, 0, "task"),
            ("m", "cap", "cs_stratified", "cs_stratified_m100_p0.05_n20_s0", 100, -80.0, 100, 0, "task")]
    with pytest.raises(ValueError, match=r"no greedy search .*'cap'"):
        efficiency_points(table4(rows))


def test_greedy_on_a_continuous_score_is_not_the_reference():
    rows = [("m", "ioi", "greedy", "greedy_k5_n20_s0_yx-margin", 1337, -68.0, None, 0, "margin"),
            ("m", "ioi", "cs_stratified", "cs_stratified_m100_p0.05_n20_s0", 100, -80.0, 100, 0, "task")]
    with pytest.raises(ValueError, match="no greedy search"):
        efficiency_points(table4(rows))
