"""headloc.report: deltas checked against hand-computed values, formats, and Figure 2."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from headloc.report import (
    add_footer,
    figure1,
    figure2,
    figure3,
    figure4,
    table1,
    table2,
    table3,
    table4,
    table5,
    table6,
    table7,
    table8,
    table9,
    table10,
    to_csv,
    to_latex,
    to_markdown,
    tuning_table,
)

BASELINE = {
    "llama": {"gsm8k": 80.0, "swear": 100.0, "boolq": 70.0},
    "qwen": {"gsm8k": 60.0, "swear": 100.0, "boolq": 75.0},
}
# (model, task, method, search) -> scores for k = 1, 2, ... on (gsm8k, swear, boolq).
# Listed swear first so that task order (first appearance) differs from alphabetical order.
RUNS = {
    ("llama", "swear", "cs_stratified", "cs_s0"): [(79, 20, 70), (78, 10, 69), (80, 5, 67)],
    ("llama", "gsm8k", "cs_stratified", "cs_s0"): [(50, 99, 69), (45, 98, 70), (40, 97.5, 68.5)],
    ("qwen", "gsm8k", "cs_stratified", "cs_s0"): [(40, 100, 74), (30, 96, 75)],
    ("llama", "gsm8k", "greedy", "greedy"): [(60, 100, 70), (55, 101, 69), (52, 99, 70.5)],
}
EVAL_TASKS = ("gsm8k", "swear", "boolq")
FOOTER = "made by rule render_table2 (scripts/render_table.py)"


def make_evals() -> pd.DataFrame:
    rows = []
    for (model, task, method, search), by_k in RUNS.items():
        base = tuple(BASELINE[model][t] for t in EVAL_TASKS)
        for k, scores in enumerate([base, *by_k]):
            for eval_task, score in zip(EVAL_TASKS, scores):
                headset = "none" if k == 0 else "+".join(f"L{i}H0" for i in range(k))
                rows.append(dict(model=model, task=task, method=method, search=search, k=k,
                                 headset=headset, eval_task=eval_task, score=float(score)))
    return pd.DataFrame(rows)


@pytest.fixture
def evals() -> pd.DataFrame:
    return make_evals()


def test_table2_deltas_match_hand_values_and_order(evals):
    t2 = table2(evals, k=3)
    assert list(t2.columns) == [
        "capability", "model", "task", "search", "k", "delta_task", "delta_gen"
    ]
    # grouped by capability (here each task is its own), model, task, in order of first
    # appearance; searches in order of appearance
    assert list(zip(t2["capability"], t2["model"], t2["task"], t2["search"])) == [
        ("swear", "llama", "swear", "cs_s0"),
        ("gsm8k", "llama", "gsm8k", "cs_s0"),
        ("gsm8k", "llama", "gsm8k", "greedy"),
        ("gsm8k", "qwen", "gsm8k", "cs_s0"),
    ]
    # qwen's run has only two heads evaluated: its largest k is used and shown
    assert t2["k"].tolist() == [3, 3, 3, 2]
    # swear: 5-100; gen = mean(80-80, 67-70). gsm8k cs: 40-80; gen = mean(97.5-100, 68.5-70).
    # gsm8k greedy: 52-80; gen = mean(99-100, 70.5-70). qwen k=2: 30-60; gen = mean(96-100, 0).
    np.testing.assert_allclose(t2["delta_task"], [-95.0, -40.0, -28.0, -30.0])
    np.testing.assert_allclose(t2["delta_gen"], [-1.5, -2.0, -0.25, -2.0])


def test_table2_gen_tasks_restricts_delta_gen(evals):
    t2 = table2(evals, k=3, gen_tasks=["boolq"])
    np.testing.assert_allclose(t2["delta_gen"], [67 - 70, 68.5 - 70, 70.5 - 70, 75 - 75])
    np.testing.assert_allclose(t2["delta_task"], [-95.0, -40.0, -28.0, -30.0])


def test_table2_delta_gen_is_nan_without_other_tasks(evals):
    only_own = evals[evals["eval_task"] == evals["task"]]
    assert table2(only_own, k=1)["delta_gen"].isna().all()


def test_table6_rows_and_baseline(evals):
    t6 = table6(evals)
    assert list(t6.columns) == [
        "capability", "model", "task", "search", "n_heads", "score", "delta_task", "delta_gen"
    ]
    run = t6[(t6["model"] == "llama") & (t6["task"] == "gsm8k") & (t6["search"] == "cs_s0")]
    assert run["n_heads"].tolist() == ["BL", 1, 2, 3]
    np.testing.assert_allclose(run["score"], [80, 50, 45, 40])
    assert math.isnan(run["delta_task"].iloc[0]) and math.isnan(run["delta_gen"].iloc[0])
    # k=1: 50-80, gen mean(99-100, 69-70); k=2: 45-80, mean(98-100, 70-70); k=3: as in Table 2
    np.testing.assert_allclose(run["delta_task"].iloc[1:], [-30.0, -35.0, -40.0])
    np.testing.assert_allclose(run["delta_gen"].iloc[1:], [-1.0, -1.0, -2.0])
    assert len(t6) == 4 + 4 + 3 + 4  # k = 0..K per run


def test_missing_column_is_named(evals):
    with pytest.raises(ValueError, match="score"):
        table2(evals.drop(columns="score"))
    with pytest.raises(ValueError, match="top_heads"):
        table10(pd.DataFrame({"model": ["m"], "task": ["t"], "method": ["x"], "search": ["s"],
                              "n_evals": [1]}))


def test_missing_baseline_names_model_and_eval_task(evals):
    drop = (evals["model"] == "qwen") & (evals["eval_task"] == "boolq") & (evals["k"] == 0)
    no_base = evals[~drop]
    with pytest.raises(ValueError, match=r"qwen.*boolq"):
        table2(no_base)
    with pytest.raises(ValueError, match=r"qwen.*boolq"):
        table6(no_base)


def test_table10_joins_top_k():
    recoveries = pd.DataFrame({
        "model": ["qwen", "llama", "qwen"],
        "task": ["gsm8k", "mbpp", "mbpp"],
        "method": ["cs_stratified"] * 3,
        "search": ["s0"] * 3,
        "top_heads": [["L27H6", "L27H0", "L27H1"], ["L4H6", "L17H11"], "L3H25, L8H31, L2H27"],
        "n_evals": [100, 200, 300],
        "r2": [0.5, 0.6, 0.7],
        "alpha": [0.01] * 3,
    })
    t10 = table10(recoveries, k=2)
    assert list(t10.columns) == ["model", "task", "method", "search", "heads", "n_evals"]
    assert t10["heads"].tolist() == ["L27H6, L27H0", "L3H25, L8H31", "L4H6, L17H11"]  # by model
    assert t10["n_evals"].tolist() == [100, 300, 200]


def test_markdown(evals):
    text = to_markdown(table2(evals, k=3), title="Table 2", footer=FOOTER)
    lines = text.splitlines()
    assert lines[0] == "**Table 2**"
    assert "| capability | model | task | search | k | delta_task | delta_gen |" in lines
    assert "| gsm8k | llama | gsm8k | cs_s0 | 3 | -40.0 | -2.0 |" in lines
    assert lines[-1] == FOOTER
    baseline_row = to_markdown(table6(evals), title="Table 6", footer=FOOTER).splitlines()[4]
    assert baseline_row == "| swear | llama | swear | cs_s0 | BL | 100.0 | - | - |"


def test_latex(evals):
    text = to_latex(table2(evals, k=3), caption="Table 2: deltas in % points", footer=FOOTER)
    assert text.startswith(r"\begin{table}") and text.rstrip().endswith(r"\end{table}")
    for piece in (r"\toprule", r"\midrule", r"\bottomrule", r"cs\_s0", r"delta\_task",
                  r"\caption{Table 2: deltas in \% points}", r"render\_table2", "-40.0"):
        assert piece in text


def test_csv_round_trips_at_full_precision(evals):
    t2 = table2(evals, k=3)
    t2.loc[0, "delta_gen"] = 1 / 3
    back = pd.read_csv(io.StringIO(to_csv(t2)))
    pd.testing.assert_frame_equal(back, t2, check_exact=True, check_dtype=False)


def test_figure2_panels_lines_and_saving(evals, tmp_path):
    fig = figure2(evals, model="llama", capability="gsm8k",
                  footer="made by rule render_figure2 (scripts/render_figure.py)")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # one panel per gsm8k search of llama; unused grid cells removed
    assert [len(ax.lines) for ax in fig.axes] == [3, 3]  # task, gen, zero line
    assert fig.axes[0].get_title() == "llama / gsm8k (cs_stratified)"
    assert fig.axes[1].get_title() == "llama / gsm8k (greedy)"
    assert fig.axes[0].get_legend() is not None
    task_line = fig.axes[0].lines[0]
    np.testing.assert_allclose(task_line.get_xdata(), [0, 1, 2, 3])
    np.testing.assert_allclose(task_line.get_ydata(), [0, -30, -35, -40])
    # defaults: the first model, the capability of its first searched task (swear)
    default = figure2(evals)
    assert [ax.get_title() for ax in default.axes] == ["llama / swear (cs_stratified)"]
    assert any("render_figure2" in t.get_text() for t in fig.texts)
    for suffix in ("png", "pdf"):
        fig.savefig(tmp_path / f"figure2.{suffix}")
        assert (tmp_path / f"figure2.{suffix}").stat().st_size > 0


def test_add_footer_returns_figure():
    fig = Figure()
    fig.add_subplot()
    assert add_footer(fig, "made by rule x (y.py)") is fig
    assert fig.texts[-1].get_text() == "made by rule x (y.py)"
