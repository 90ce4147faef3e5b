import math

import pytest

from headloc.data.units import display_score
from headloc.workflow.results import evals_frame, recoveries_frame, selections

RECOVERY = {"model": "m", "task": "ioi", "method": "cs_stratified", "search": "s1",
            "top_heads": ["L3H1", "L0H2"], "ranking": ["L3H1", "L0H2", "L1H1", "L2H2"],
            "n_evals": 100, "r2": 0.5, "alpha": 0.01, "coef": {"L3H1": -0.4, "L0H2": -0.3, "L1H1": -0.2, "L2H2": -0.1}}
SWEAR = {**RECOVERY, "task": "swear", "search": "s2", "ranking": ["L3H1", "L2H2", "L0H2", "L1H1"],
         "top_heads": ["L3H1", "L2H2"], "coef": {"L3H1": -0.4, "L2H2": -0.3, "L0H2": -0.2, "L1H1": -0.1}}
TASK = {"model": "m", "kind": "task", "task": "ioi", "method": "cs_stratified", "search": "s1",
        "heads": ["L3H1", "L0H2"]}
CAPS = {"ioi": "syntax", "swear": "language"}
DIRECTIONS = {"ioi": True, "swear": True}  # what each task's YAML declares for its metric


def record(task, headset, value):
    return {"model": "m", "task": task, "headset": headset, "value": value}


EVALS = [
    record("ioi", "none", 0.9), record("ioi", "L3H1", 0.6), record("ioi", "L0H2+L3H1", 0.3),
    record("swear", "none", 8.0), record("swear", "L3H1", 6.0), record("swear", "L0H2+L3H1", 2.0),
]


def test_display_units():
    assert display_score(0.25, 0.9, "points") == 25.0
    assert display_score(6.0, 8.0, "relative") == 75.0
    assert math.isnan(display_score(1.0, 0.0, "relative"))
    assert display_score(431.8, 409.6, "own") == 431.8  # a perplexity stays a perplexity
    with pytest.raises(ValueError, match="score 431.8 is not a fraction in \\[0, 1\\]"):
        display_score(431.8, 409.6, "points")


def test_a_count_is_never_shown_in_percentage_points():
    """swear's profane-word counts are no fraction: without their unit the frame refuses them."""
    with pytest.raises(ValueError, match="task swear: score 8.0 is not a fraction"):
        evals_frame([TASK], EVALS, directions=DIRECTIONS)
    frame = evals_frame([TASK], EVALS, units={"swear": "own"}, directions=DIRECTIONS)
    assert sorted(frame.query("eval_task == 'swear'")["score"]) == [2.0, 6.0, 8.0]


def test_evals_frame_rows_and_scores():
    frame = evals_frame([TASK], EVALS, units={"swear": "relative"}, capabilities=CAPS, directions=DIRECTIONS)
    assert len(frame) == 3 * 2  # k = 0, 1, 2 on two tasks
    got = {(r.k, r.eval_task): (r.headset, r.score) for r in frame.itertuples()}
    assert got[(0, "ioi")] == ("none", pytest.approx(90.0))
    assert got[(1, "ioi")] == ("L3H1", pytest.approx(60.0))
    assert got[(2, "ioi")] == ("L0H2+L3H1", pytest.approx(30.0))  # canonical order, not rank order
    assert got[(0, "swear")][1] == pytest.approx(100.0)
    assert got[(2, "swear")][1] == pytest.approx(25.0)
    assert set(frame["task"]) == {"ioi"} and set(frame["capability"]) == {"syntax"}
    assert set(frame["eval_capability"]) == {"syntax", "language"} and set(frame["kind"]) == {"task"}


def test_single_head_kinds_share_one_baseline_per_model():
    universal = [{"model": "m", "kind": "universal", "task": "", "method": "", "search": "",
                  "heads": [head]} for head in ("L3H1", "L0H2")]
    evals = EVALS + [record("ioi", "L0H2", 0.45), record("swear", "L0H2", 4.0)]
    frame = evals_frame(universal, evals, units={"swear": "relative"}, directions=DIRECTIONS)
    assert sorted(frame["k"]) == [0, 0, 1, 1, 1, 1]
    assert frame.query("headset == 'L0H2' and eval_task == 'swear'")["score"].item() == pytest.approx(50.0)


def test_missing_evaluation_is_named():
    with pytest.raises(KeyError, match="task swear, heads L0H2\\+L3H1"):
        evals_frame([TASK], EVALS[:-1], units={"swear": "relative"}, directions=DIRECTIONS)


def test_selections_filter_universal_heads():
    chosen = selections([RECOVERY, SWEAR], main={"ioi": "s1", "swear": "s2"}, capabilities=CAPS, k=2,
                        universal={"top_n": 1, "min_capabilities": 2, "filter": True},
                        knowledge={"tasks": [], "top_n": 5, "min_tasks": None}, extra=["L1H1+L2H2"])
    by_kind = {}
    for s in chosen:
        by_kind.setdefault(s["kind"], []).append(s)
    assert [s["heads"] for s in by_kind["universal"]] == [["L3H1"]]  # top 1 of both capabilities
    assert {s["task"]: s["heads"] for s in by_kind["task"]} == {"ioi": ["L0H2", "L1H1"],
                                                                 "swear": ["L2H2", "L0H2"]}
    assert by_kind["extra"][0]["heads"] == ["L1H1", "L2H2"]
    # each search's own top 2 (universal L3H1 kept), for Table 4's unfiltered columns
    assert {s["task"]: s["heads"] for s in by_kind["unfiltered"]} == {"ioi": ["L3H1", "L0H2"],
                                                                       "swear": ["L3H1", "L2H2"]}
    frame = recoveries_frame([RECOVERY, SWEAR], chosen, CAPS)
    assert frame.set_index("task").loc["ioi", "top_heads"] == ["L0H2", "L1H1"]
    # universal.heads of the recoveries' model: L0H2 filtered instead of the detected L3H1
    given = selections([RECOVERY, SWEAR], main={"ioi": "s1", "swear": "s2"}, capabilities=CAPS, k=2,
                       universal={"top_n": 1, "min_capabilities": 2, "filter": True, "heads": {"m": ["L0H2"]}},
                       knowledge={"tasks": [], "top_n": 5, "min_tasks": None})
    assert [s["heads"] for s in given if s["kind"] == "universal"] == [["L0H2"]]
    assert {s["task"]: s["heads"] for s in given if s["kind"] == "task"} == {"ioi": ["L3H1", "L1H1"],
                                                                             "swear": ["L3H1", "L2H2"]}
    assert frame.set_index("task").loc["swear", "capability"] == "language"


def test_recoveries_frame_without_selection_keeps_recovered_top():
    frame = recoveries_frame([RECOVERY])
    assert frame.loc[0, "top_heads"] == ["L3H1", "L0H2"] and frame.loc[0, "n_evals"] == 100


def test_each_shown_head_carries_its_value_interval_and_top_k_share():
    """recoveries.tsv's effects: each shown head by name with its value, its 95 % interval and
    P(top k) where recovery.json has them (a Lasso's -0.0 as 0); a head without them, its value only."""
    record = {**RECOVERY, "coef": {**RECOVERY["coef"], "L0H2": -0.0},
              "interval": {"L3H1": [-0.61234, -0.2], "L0H2": None}, "p_top_k": {"L3H1": 0.974, "L0H2": None}}
    assert recoveries_frame([record]).loc[0, "effects"] == ["L3H1 -0.4 [-0.612, -0.2] P 0.97", "L0H2 0"]
    assert recoveries_frame([RECOVERY]).loc[0, "effects"] == ["L3H1 -0.4", "L0H2 -0.3"]  # written before evidence


def test_collected_tables_have_what_the_report_needs():
    """The columns each collect script writes (headloc.workflow.results) cover what the report reads."""
    from headloc.report import frames
    from headloc.workflow.results import (EVALS_FRAME_COLUMNS, MODELS_FRAME_COLUMNS, RECOVERIES_FRAME_COLUMNS,
                                 TUNING_FRAME_COLUMNS)

    frame = evals_frame([TASK], EVALS, units={"swear": "relative"}, capabilities=CAPS, directions=DIRECTIONS)
    assert list(frame.columns) == EVALS_FRAME_COLUMNS
    assert list(recoveries_frame([RECOVERY]).columns) == RECOVERIES_FRAME_COLUMNS
    for needs, has in ((frames.TASK_EVALS_NEED, EVALS_FRAME_COLUMNS),
                       (frames.SHARED_EVALS_NEED, EVALS_FRAME_COLUMNS),
                       (frames.RECOVERIES_NEED, RECOVERIES_FRAME_COLUMNS),
                       (frames.MODELS_NEED, MODELS_FRAME_COLUMNS),
                       (frames.TUNING_NEED, TUNING_FRAME_COLUMNS)):
        assert set(needs) <= set(has), set(needs) - set(has)


def test_report_reads_the_collected_evaluations():
    """results -> TSV -> report Table 2: deltas by hand from the records above (swear relative)."""
    import io

    import pandas as pd

    from headloc.report import TABLES, ReportOptions

    frame = evals_frame([TASK], EVALS, units={"swear": "relative"}, capabilities=CAPS, directions=DIRECTIONS)
    evals = pd.read_csv(io.StringIO(frame.to_csv(sep="\t", index=False)), sep="\t")
    recoveries = recoveries_frame([RECOVERY], capabilities=CAPS)
    recoveries["top_heads"] = recoveries["top_heads"].str.join(",")  # as collect_recoveries writes
    given = {"evals_main": evals, "recoveries": recoveries, "recoveries_main": recoveries}
    for k, delta_task, delta_gen in ((1, 60 - 90, 75 - 100), (2, 30 - 90, 25 - 100)):
        t2 = TABLES["table2"].build(given, ReportOptions(top_k=k, method="cs_stratified"))
        assert t2[["capability", "task", "k"]].values.tolist() == [["syntax", "ioi", k]]
        assert t2["delta_task"].item() == pytest.approx(delta_task)
        assert t2["delta_gen"].item() == pytest.approx(delta_gen)
    t10 = TABLES["table10"].build(given, ReportOptions(top_k=1))
    assert t10["heads"].tolist() == ["L3H1"]


def test_only_the_main_search_is_validated_cumulatively():
    other = {**RECOVERY, "method": "greedy", "search": "g"}
    chosen = selections([RECOVERY, other], main={"ioi": "s1"}, capabilities=CAPS, k=2,
                        universal={"top_n": 1, "min_capabilities": 2, "filter": False},
                        knowledge={"tasks": [], "top_n": 5, "min_tasks": None})
    assert {s["search"]: s["cumulative"] for s in chosen} == {"s1": True, "g": False}
    assert {s["kind"] for s in chosen} == {"task"}  # filter off: no separate unfiltered selections
    frame = evals_frame(chosen, EVALS, units={"swear": "relative"}, directions=DIRECTIONS)
    assert sorted(frame.query("search == 'g' and eval_task == 'ioi'")["k"]) == [0, 2]  # no top 1
    assert sorted(frame.query("search == 's1' and eval_task == 'ioi'")["k"]) == [0, 1, 2]


def test_each_row_carries_its_eval_tasks_direction():
    """The report orients every delta by the direction beside each score; a task without a boolean one is
    refused, naming it."""
    frame = evals_frame([TASK], EVALS, units={"swear": "relative"}, directions={"ioi": True, "swear": False})
    assert frame.groupby("eval_task")["higher_is_better"].unique().map(list).to_dict() == {
        "ioi": [True], "swear": [False]}
    for directions, value in (({"ioi": True}, "'missing'"), ({"ioi": True, "swear": "false"}, "'false'")):
        with pytest.raises(ValueError, match=f"task swear: its metric's direction \\(higher_is_better\\) is {value}"):
            evals_frame([TASK], EVALS, units={"swear": "relative"}, directions=directions)
