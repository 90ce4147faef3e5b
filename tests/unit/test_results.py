import math

import pytest

from headloc.results import display_score, evals_frame, recoveries_frame

RECOVERY = {"model": "m", "task": "ioi", "method": "cs_stratified", "search": "s1",
            "top_heads": ["L3H1", "L0H2"], "n_evals": 100, "r2": 0.5, "alpha": 0.01}


def record(task, headset, value):
    return {"model": "m", "task": task, "headset": headset, "value": value}


EVALS = [
    record("ioi", "none", 0.9), record("ioi", "L3H1", 0.6), record("ioi", "L0H2+L3H1", 0.3),
    record("swear", "none", 8.0), record("swear", "L3H1", 6.0), record("swear", "L0H2+L3H1", 2.0),
]


def test_display_units():
    assert display_score(0.25, 0.9, relative=False) == 25.0
    assert display_score(6.0, 8.0, relative=True) == 75.0
    assert math.isnan(display_score(1.0, 0.0, relative=True))


def test_evals_frame_rows_and_scores():
    frame = evals_frame([RECOVERY], EVALS, relative_tasks=["swear"])
    assert len(frame) == 3 * 2  # k = 0, 1, 2 on two tasks
    got = {(r.k, r.eval_task): (r.headset, r.score) for r in frame.itertuples()}
    assert got[(0, "ioi")] == ("none", pytest.approx(90.0))
    assert got[(1, "ioi")] == ("L3H1", pytest.approx(60.0))
    assert got[(2, "ioi")] == ("L0H2+L3H1", pytest.approx(30.0))  # canonical order, not rank order
    assert got[(0, "swear")][1] == pytest.approx(100.0)
    assert got[(2, "swear")][1] == pytest.approx(25.0)
    assert set(frame["task"]) == {"ioi"} and set(frame["search"]) == {"s1"}


def test_missing_evaluation_is_named():
    with pytest.raises(KeyError, match="task swear, heads L0H2\\+L3H1"):
        evals_frame([RECOVERY], EVALS[:-1])


def test_recoveries_frame():
    frame = recoveries_frame([RECOVERY])
    assert frame.loc[0, "top_heads"] == ["L3H1", "L0H2"] and frame.loc[0, "n_evals"] == 100
