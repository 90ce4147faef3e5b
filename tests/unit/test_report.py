"""headloc.report: deltas checked against hand-computed values, the shared frame helpers, the
registry of tables and figures, formats, figures, and the render scripts."""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import math
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from PIL import Image

from headloc.report import (
    FIGURES,
    TABLES,
    ReportOptions,
    TableSpec,
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
from headloc.report import capabilities, delta, frames

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
                                 headset=headset, eval_task=eval_task, score=float(score),
                                 higher_is_better=True))
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
        fig.savefig(tmp_path / f"figure2.{suffix}", dpi=100)
        assert (tmp_path / f"figure2.{suffix}").stat().st_size > 0
    # two 3.4 x 2.8 in panels side by side (figures._figure: ncols = min(3, panels)), saved whole
    png = (tmp_path / "figure2.png").read_bytes()
    assert png.startswith(PNG_MAGIC), png[:8]
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG" and image.size == (2 * 340, 280)  # inches x 100 dpi
    # one page of the same size in points (72 per inch)
    assert pdf_pages((tmp_path / "figure2.pdf").read_bytes()) == [
        pytest.approx((2 * 3.4 * 72, 2.8 * 72))]


def test_add_footer_returns_figure():
    fig = Figure()
    fig.add_subplot()
    assert add_footer(fig, "made by rule x (y.py)") is fig
    assert fig.texts[-1].get_text() == "made by rule x (y.py)"


# ---------------------------------------------------------------- paper-shaped evals (with kind)

CAPS = {"gsm8k": "math", "arith": "math", "mbpp": "code", "boolq": "general",
        "mmlu": "knowledge", "wmdp_bio": "knowledge"}
TASKS = list(CAPS)
BASE = (80, 90, 50, 70, 46, 56)  # m1's unablated scores, in TASKS order
# searched task -> scores for k = 1, 2, ... (TASKS order); method cs_stratified
TASK_RUNS = {
    "gsm8k": [(60, 70, 50, 69, 46, 56), (40, 60, 48, 68, 45, 55)],
    "arith": [(70, 30, 50, 70, 46, 55)],
    "wmdp_bio": [(80, 90, 50, 70, 45, 50)],
}
UNIVERSAL = {"L1H2": (20, 10, 30, 40, 30, 35), "L0H3": (78, 90, 20, 65, 46, 56)}
KNOWLEDGE = {"L0H22": (81, 89, 50, 69, 25, 26)}
GEN = ["boolq", "mmlu"]


def paper_evals(model: str = "m1") -> pd.DataFrame:
    rows = []

    def add(kind, task, k, headset, scores):
        for eval_task, score in zip(TASKS, scores):
            rows.append(dict(
                model=model, kind=kind, task=task, capability=CAPS.get(task, ""),
                method="cs_stratified" if task else "", search="cs" if task else "", k=k,
                headset=headset, eval_task=eval_task, eval_capability=CAPS[eval_task],
                score=float(score), higher_is_better=True))

    for task, by_k in TASK_RUNS.items():
        for k, scores in enumerate([BASE, *by_k]):
            add("task", task, k, "none" if k == 0 else "+".join(f"L9H{i}" for i in range(k)),
                scores)
    for kind, heads in (("universal", UNIVERSAL), ("knowledge", KNOWLEDGE)):
        add(kind, "", 0, "none", BASE)
        for head, scores in heads.items():
            add(kind, "", 1, head, scores)
    add("extra", "", 2, "L5H5+L6H6", (0,) * len(TASKS))  # user head sets: never in paper tables
    return pd.DataFrame(rows)


@pytest.fixture
def pevals() -> pd.DataFrame:
    return paper_evals()


def tsv_round_trip(df: pd.DataFrame) -> pd.DataFrame:
    """As the scripts read it: empty task/method/search cells come back as NaN."""
    return pd.read_csv(io.StringIO(df.to_csv(sep="\t", index=False)), sep="\t")


def test_table2_main_method_and_capability_groups(pevals):
    t2 = table2(tsv_round_trip(pevals), k=5, gen_tasks=GEN, method="cs_stratified")
    assert list(zip(t2["capability"], t2["task"], t2["k"])) == [
        ("math", "gsm8k", 2), ("math", "arith", 1), ("knowledge", "wmdp_bio", 1)]
    np.testing.assert_allclose(t2["delta_task"], [40 - 80, 30 - 90, 50 - 56])
    # gsm8k: mean(boolq 68-70, mmlu 45-46); arith: mean(0, 0); wmdp_bio: mean(0, 45-46)
    np.testing.assert_allclose(t2["delta_gen"], [-1.5, 0.0, -0.5])
    with pytest.raises(ValueError, match=r"'greedy'.*methods present: cs_stratified"):
        table2(pevals, method="greedy")


def test_table3_cross_dataset_deltas(pevals):
    t3 = table3(tsv_round_trip(pevals), k=5, gen_tasks=GEN, method="cs_stratified")
    assert list(t3.columns) == [
        "capability", "model", "id_on", "eval_on", "search", "k", "delta_task", "delta_gen"]
    assert list(zip(t3["id_on"], t3["eval_on"])) == [
        ("gsm8k", "gsm8k"), ("gsm8k", "arith"), ("arith", "arith"), ("arith", "gsm8k"),
        ("wmdp_bio", "wmdp_bio"), ("wmdp_bio", "mmlu")]
    # gsm8k heads (k=2): gsm8k 40-80, arith 60-90; arith heads (k=1): arith 30-90, gsm8k 70-80;
    # wmdp_bio heads: wmdp_bio 50-56, mmlu 45-46
    np.testing.assert_allclose(t3["delta_task"], [-40, -30, -60, -10, -6, -1])
    np.testing.assert_allclose(t3["delta_gen"], [-1.5, -1.5, 0, 0, -0.5, -0.5])
    assert t3["k"].tolist() == [2, 2, 1, 1, 1, 1]
    # k = 1 picks the first head's row of the gsm8k run: arith 70-90
    assert table3(pevals, k=1).loc[1, "delta_task"] == pytest.approx(-20)


def test_table4_every_method_with_n_evals(pevals):
    greedy = pevals[(pevals["kind"] == "task") & (pevals["task"] == "gsm8k")].copy()
    greedy["method"], greedy["search"] = "greedy", "g"
    greedy.loc[greedy["k"] > 0, "score"] -= 5  # every ablated score 5 points lower
    evals = pd.concat([pevals, greedy], ignore_index=True)
    recoveries = pd.DataFrame({
        "model": "m1", "task": ["gsm8k", "gsm8k", "arith"], "capability": "math",
        "method": ["cs_stratified", "greedy", "cs_stratified"], "search": ["cs", "g", "cs"],
        "top_heads": ["L9H0,L9H1", "L9H0,L9H1", "L9H0"], "n_evals": [100, 5120, 200],
        "r2": 0.5, "alpha": 0.01})
    t4 = table4(evals, recoveries, k=2, gen_tasks=GEN)
    assert list(zip(t4["task"], t4["method"])) == [
        ("gsm8k", "cs_stratified"), ("gsm8k", "greedy"), ("arith", "cs_stratified"),
        ("wmdp_bio", "cs_stratified")]
    np.testing.assert_allclose(t4["delta_task"], [-40, -45, -60, -6])
    np.testing.assert_allclose(t4["delta_gen"], [-1.5, -6.5, 0, -0.5])
    assert t4["n_evals"].tolist()[:3] == [100, 5120, 200]
    assert math.isnan(t4["n_evals"].iloc[3])  # no recovery row for wmdp_bio


def test_table5_capability_means(pevals):
    t5 = table5(tsv_round_trip(pevals), gen_tasks=["boolq"], capabilities=CAPS)
    # general is all in gen_tasks, so it is Delta Gen and gets no column of its own
    assert list(t5.columns) == [
        "model", "head", "delta_math", "delta_code", "delta_knowledge", "delta_gen"]
    assert t5["head"].tolist() == ["L0H3", "L1H2"]  # sorted by (layer, head)
    # L0H3: math mean(78-80, 90-90), code 20-50, knowledge mean(0, 0), gen 65-70
    # L1H2: math mean(20-80, 10-90), code 30-50, knowledge mean(30-46, 35-56), gen 40-70
    np.testing.assert_allclose(t5.iloc[0, 2:].astype(float), [-1, -30, 0, -5])
    np.testing.assert_allclose(t5.iloc[1, 2:].astype(float), [-70, -20, -18.5, -30])


def test_table7_baseline_and_per_task_deltas(pevals):
    t7 = table7(tsv_round_trip(pevals))
    assert list(t7.columns) == ["model", "head", *TASKS, "avg"]
    assert t7["head"].tolist() == ["BL", "L0H3", "L1H2"]
    np.testing.assert_allclose(t7.iloc[0, 2:].astype(float), [*BASE, 392 / 6])
    np.testing.assert_allclose(t7.iloc[1, 2:].astype(float), [-2, 0, -30, -5, 0, 0, -37 / 6])
    np.testing.assert_allclose(t7.iloc[2, 2:].astype(float),
                               [-60, -80, -20, -30, -16, -21, -227 / 6])


def test_table8_groups_knowledge_mc(pevals):
    t8 = table8(tsv_round_trip(pevals), ["mmlu", "wmdp_bio"])
    assert list(t8.columns) == ["model", "head", "mmlu", "wmdp_bio", "knowledge_mc_avg",
                                "gsm8k", "arith", "mbpp", "boolq", "other_avg"]
    np.testing.assert_allclose(t8.iloc[0, 2:].astype(float), [46, 56, 51, 80, 90, 50, 70, 72.5])
    np.testing.assert_allclose(t8.iloc[1, 2:].astype(float),
                               [-21, -30, -25.5, 1, -1, 0, -1, -0.25])
    with pytest.raises(ValueError, match=r"wmdp_chem.*evaluated: gsm8k"):
        table8(pevals, ["mmlu", "wmdp_chem"])


def test_table1_models_and_bad_total():
    models = pd.DataFrame({"model": ["a", "b"], "source": "x", "n_layers": [30, 16],
                           "n_heads": [9, 32], "n_kv_heads": [3, 8], "total": [270, 512]})
    t1 = table1(models)
    assert t1.values.tolist() == [["a", 30, 9, 270], ["b", 16, 32, 512]]
    models.loc[1, "total"] = 500
    with pytest.raises(ValueError, match=r"500.*'b'.*16 x 32"):
        table1(models)


def test_table9_every_method_table10_main_method():
    recoveries = pd.DataFrame({
        "model": ["m1", "m1", "m2", "m1"], "task": ["gsm8k", "gsm8k", "gsm8k", "swear"],
        "capability": ["math", "math", "math", "language"],
        "method": ["greedy", "cs_stratified", "cs_stratified", "cs_stratified"],
        "search": ["g", "cs", "cs", "cs"],
        "top_heads": ["L16H21,L15H13,L18H18", "L15H13,L16H2", "L27H6", np.nan],
        "n_evals": [5120, 100, 100, 200], "r2": 0.5, "alpha": 0.01})
    t9 = table9(recoveries, k=2)
    assert list(zip(t9["model"], t9["task"], t9["method"], t9["heads"])) == [
        ("m1", "gsm8k", "greedy", "L16H21, L15H13"), ("m1", "gsm8k", "cs_stratified",
                                                      "L15H13, L16H2"),
        ("m1", "swear", "cs_stratified", ""), ("m2", "gsm8k", "cs_stratified", "L27H6")]
    t10 = table10(recoveries, k=2, method="cs_stratified")
    assert t10["heads"].tolist() == ["L15H13, L16H2", "", "L27H6"]
    with pytest.raises(ValueError, match="'cs_bernoulli'"):
        table10(recoveries, method="cs_bernoulli")


def test_tuning_table_marks_chosen():
    tuning = pd.DataFrame({
        "model": "m1", "task": "gsm8k", "method": "cs_stratified",
        "n_masks": [400, 100, 100], "sparsity": [0.01, 0.05, 0.01], "search": ["a", "b", "c"],
        "top_heads": ["L1H2,L3H4", "L1H2", "L5H5"], "baseline": 80.0,
        "ablated": [30.0, 50.0, 70.0], "degradation": [-50.0, -30.0, -10.0],
        "chosen": ["True", "False", "False"]})
    t = tuning_table(tuning)
    assert list(zip(t["n_masks"], t["sparsity"])) == [(100, "0.01"), (100, "0.05"), (400, "0.01")]
    assert t["chosen"].tolist() == ["", "", "yes"]
    assert t["top_heads"].tolist() == ["L5H5", "L1H2", "L1H2, L3H4"]


def test_empty_but_valid_inputs_render_with_a_note(pevals):
    task_only = pevals[pevals["kind"] == "task"]
    no_tasks = pevals[pevals["kind"] != "task"]
    empties = {
        "table2": table2(no_tasks, method="cs_stratified"),
        "table3": table3(no_tasks),
        "table5": table5(task_only, capabilities=CAPS),
        "table7": table7(task_only),
        "table8": table8(task_only, ["mmlu"]),
        "table9": table9(pd.DataFrame(columns=["model", "task", "method", "search",
                                               "top_heads", "n_evals"])),
        "tuning": tuning_table(pd.DataFrame(columns=["model", "task", "method", "n_masks",
                                                     "sparsity", "search", "top_heads",
                                                     "baseline", "ablated", "degradation",
                                                     "chosen"])),
    }
    for name, table in empties.items():
        assert table.empty and table.attrs["note"], name
    assert "kind == 'universal'" in empties["table5"].attrs["note"]
    assert list(empties["table5"].columns) == [
        "model", "head", "delta_math", "delta_code", "delta_general", "delta_knowledge",
        "delta_gen"]  # capabilities in config order
    md = to_markdown(empties["table7"], title="Table 7", footer=FOOTER)
    assert "| model | head | avg |" in md
    assert "*no universal heads in evals (kind == 'universal')*" in md
    tex = to_latex(empties["table7"], caption="Table 7", footer=FOOTER)
    assert r"\multicolumn{3}{l}{\emph{no universal heads in evals (kind == 'universal')}}" in tex
    assert to_csv(empties["table7"]) == "model,head,avg\n"


def test_malformed_shared_head_input_raises(pevals):
    no_base = pevals[~((pevals["kind"] == "universal") & (pevals["k"] == 0))
                     & ~((pevals["eval_task"] == "mbpp") & (pevals["k"] == 0))]
    with pytest.raises(ValueError, match=r"'m1'.*'mbpp'"):
        table7(no_base)
    with pytest.raises(ValueError, match="headset"):
        table5(pevals.drop(columns="headset"))


def test_figure1_bars_and_highlight(pevals):
    fig = figure1(tsv_round_trip(pevals), model="m1", capability="math", k=5, gen_tasks=GEN,
                  method="cs_stratified", footer="made by rule render_figure (fig1)")
    (ax,) = fig.axes
    assert len(ax.patches) == 2 * (len(TASKS) + 1)  # unablated + ablated per task, + gen pair
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [*TASKS, "gen (mean)"]
    heights = [p.get_height() for p in ax.patches]
    # first math task searched is gsm8k; its run has two heads, so k = 2
    np.testing.assert_allclose(heights[:7], [*BASE, (70 + 46) / 2])
    np.testing.assert_allclose(heights[7:], [40, 60, 48, 68, 45, 55, (68 + 45) / 2])
    bold = [t.get_text() for t in ax.get_xticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["gsm8k", "arith"]
    assert "top 2 gsm8k heads" in ax.get_title()
    with pytest.raises(ValueError, match=r"'nope'.*models present: m1"):
        figure1(pevals, model="nope")


def test_figure2_capability_panels(pevals):
    fig = figure2(pevals, model="m1", capability="math", gen_tasks=GEN, method="cs_stratified")
    assert [ax.get_title() for ax in fig.axes] == [
        "m1 / gsm8k (cs_stratified)", "m1 / arith (cs_stratified)"]
    assert [len(ax.lines) for ax in fig.axes] == [4, 4]  # own, other math task, gen, zero
    own, other, gen, _ = fig.axes[0].lines
    np.testing.assert_allclose(own.get_ydata(), [0, -20, -40])
    np.testing.assert_allclose(other.get_ydata(), [0, -20, -30])  # arith under gsm8k heads
    np.testing.assert_allclose(gen.get_ydata(), [0, -0.5, -1.5])
    with pytest.raises(ValueError, match=r"'code'.*math, knowledge"):
        figure2(pevals, capability="code")


def test_figure3_one_panel_per_model_with_chance_line(pevals):
    evals = pd.concat([pevals, paper_evals("m2")], ignore_index=True)
    fig = figure3(evals, ["mmlu", "wmdp_bio"], gen_tasks=["boolq"])
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert len(ax.patches) == 3 * 2  # (mmlu, wmdp_bio, gen) x (unablated, L0H22)
    np.testing.assert_allclose([p.get_height() for p in ax.patches], [46, 56, 70, 25, 26, 69])
    (chance,) = ax.lines
    assert chance.get_linestyle() == "--" and list(chance.get_ydata()) == [25, 25]


def test_figure4_one_panel_per_searched_knowledge_task(pevals):
    fig = figure4(pevals, model="m1", knowledge_tasks=["wmdp_bio", "mmlu"],
                  method="cs_stratified")
    (ax,) = fig.axes  # mmlu was not searched
    assert len(ax.lines) == 3  # wmdp_bio, mmlu, zero
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0, -6])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [0, -1])


def test_figures_with_nothing_to_plot_show_a_note(pevals):
    task_only = pevals[pevals["kind"] == "task"]
    cases = {
        "fig1": figure1(pevals[pevals["kind"] != "task"]),
        "fig2": figure2(pevals[pevals["kind"] != "task"]),
        "fig3": figure3(task_only, ["mmlu"]),
        "fig4": figure4(pevals, knowledge_tasks=[]),
        "fig4 unsearched": figure4(pevals, knowledge_tasks=["mmlu"]),
    }
    for name, fig in cases.items():
        (ax,) = fig.axes
        assert ax.texts[0].get_text().startswith("no data: "), name
    assert "knowledge.tasks is empty" in cases["fig4"].axes[0].texts[0].get_text()


# ---------------------------------------------------------------- shared tidy-frame helpers


def test_check_columns_names_every_missing_column():
    frames.check_columns(pd.DataFrame(columns=["a", "b"]), ["a"], "evals")  # no error
    with pytest.raises(ValueError, match=r"^recoveries is missing required column\(s\): b, c$"):
        frames.check_columns(pd.DataFrame(columns=["a"]), ["a", "b", "c"], "recoveries")


def test_check_k_accepts_zero_refuses_negative():
    frames.check_k(0)
    with pytest.raises(ValueError, match="k must be >= 0, got -2"):
        frames.check_k(-2)
    # every k-taking builder uses it
    for call in (lambda: table2(make_evals(), k=-1), lambda: table3(make_evals(), k=-1),
                 lambda: figure1(make_evals(), k=-1)):
        with pytest.raises(ValueError, match="got -1"):
            call()


def test_empty_table_and_is_blank():
    t = frames.empty_table(("model", "head"), "why")
    assert list(t.columns) == ["model", "head"] and t.empty and t.attrs["note"] == "why"
    assert [frames.is_blank(v) for v in (math.nan, None, "", " ", "x", 0, 0.0)] == [
        True, True, True, False, False, False, False]


def test_kind_rows_reads_a_frame_without_kind_as_task_rows(pevals):
    assert len(frames.kind_rows(pevals, "universal")) == len(TASKS) * (1 + len(UNIVERSAL))
    bare = pevals.drop(columns="kind")
    assert len(frames.kind_rows(bare, "task")) == len(bare)
    assert frames.kind_rows(bare, "knowledge").empty


def test_capability_map_config_first_then_frame_first_seen():
    evals = pd.DataFrame({"task": ["gsm8k", "gsm8k", np.nan], "capability": ["math", "x", np.nan],
                          "eval_task": ["gsm8k", "boolq", "mbpp"],
                          "eval_capability": ["y", "general", "code"]})
    # task/capability pairs are read before eval_task/eval_capability; first seen wins
    assert capabilities.capability_map(evals) == {"gsm8k": "math", "boolq": "general", "mbpp": "code"}
    assert capabilities.capability_map(evals, {"gsm8k": "arith", "swear": "lang"}) == {
        "gsm8k": "arith", "boolq": "general", "mbpp": "code", "swear": "lang"}
    assert capabilities.capability_map(evals[["eval_task"]]) == {}
    assert capabilities.capabilities_of(["gsm8k", "other"], {"gsm8k": "math"}) == ["math", "other"]


def test_only_method_filters_names_and_passes_empty_frames():
    runs = pd.DataFrame({"method": ["greedy", "cs", "cs"], "search": ["g", "a", "b"]})
    assert frames.only_method(runs, "cs", name="x", source="y")["search"].tolist() == ["a", "b"]
    assert frames.only_method(runs, None, name="x", source="y") is runs
    empty = runs.iloc[0:0]
    assert frames.only_method(empty, "lasso", name="x", source="y") is empty
    with pytest.raises(ValueError, match=r"^table10: no searches with method 'lasso' in "
                                         r"recoveries; methods present: greedy, cs$"):
        frames.only_method(runs, "lasso", name="table10", source="recoveries")


def test_the_method_filter_is_the_same_for_evals_and_recoveries(pevals):
    recoveries = pd.DataFrame({"model": ["m1"], "task": ["gsm8k"], "method": ["cs_stratified"],
                               "search": ["cs"], "top_heads": ["L1H1"], "n_evals": [1]})
    for call, source in ((lambda: table2(pevals, method="greedy"), "evals"),
                         (lambda: figure2(pevals, method="greedy"), "evals"),
                         (lambda: table10(recoveries, method="greedy"), "recoveries")):
        with pytest.raises(ValueError, match=rf"no searches with method 'greedy' in {source}; "
                                             r"methods present: cs_stratified"):
            call()


def test_task_runs_keeps_task_rows_of_the_method(pevals):
    rows = frames.task_runs(pevals, "cs_stratified")
    assert set(rows["kind"]) == {"task"}
    assert len(rows) == len(TASKS) * sum(len(v) + 1 for v in TASK_RUNS.values())
    with pytest.raises(ValueError, match="missing required column.*search"):
        frames.task_runs(pevals.drop(columns="search"))


def test_knowledge_eval_task_check_is_shared_by_table8_and_figure3(pevals):
    assert frames.check_knowledge_eval_tasks(pevals, ["mmlu"], "x") == TASKS
    for call, name in ((lambda: table8(pevals, ["wmdp_chem"]), "table8"),
                       (lambda: figure3(pevals, ["wmdp_chem"]), "figure3")):
        with pytest.raises(ValueError, match=rf"^{name}: knowledge eval task\(s\) wmdp_chem not "
                                             r"evaluated with the knowledge heads; evaluated: "
                                             r"gsm8k, arith, mbpp, boolq, mmlu, wmdp_bio$"):
            call()


def test_sort_first_seen_is_stable_and_orders_by_first_appearance():
    df = pd.DataFrame({"a": ["y", "x", "y", "x"], "k": [2, 9, 1, 3], "id": [0, 1, 2, 3]})
    assert frames.sort_first_seen(df, ["a"])["id"].tolist() == [0, 2, 1, 3]
    assert frames.sort_first_seen(df, ["a"], then=["k"])["id"].tolist() == [2, 0, 3, 1]


def test_baselines_and_deltas_against_the_mean_of_k0_rows():
    rows = pd.DataFrame({"model": ["m", "m", "m", "n", "n"], "eval_task": ["a", "a", "a", "a", "a"],
                         "k": [0, 0, 1, 0, 2], "score": [70.0, 72.0, 50.0, 10.0, 4.0], "higher_is_better": True})
    base = delta.baselines(rows)
    assert base.to_dict() == {("m", "a"): 71.0, ("n", "a"): 10.0}
    np.testing.assert_allclose(delta.with_delta(rows, base)["delta"], [-1, 1, -21, 0, -6])
    with pytest.raises(ValueError, match=r"model 'm' eval_task 'b', model 'n' eval_task 'c'"):
        delta.check_baselines(pd.DataFrame({"model": ["m", "n"], "eval_task": ["b", "c"]}),
                              base)


def test_deltas_every_k_hand_values(evals):
    d = delta.deltas(evals, method="greedy")
    assert list(d.columns) == list(delta.DELTA_COLUMNS)
    assert d["k"].tolist() == [0, 1, 2, 3]
    # greedy gsm8k of llama: 60, 55, 52 against 80; gen mean(swear, boolq) deltas
    np.testing.assert_allclose(d["delta_task"], [0, -20, -25, -28])
    np.testing.assert_allclose(d["delta_gen"], [0, 0, (1 - 1) / 2, (-1 + 0.5) / 2])
    assert delta.deltas(evals.iloc[0:0]).empty



# ---------------------------------------------------------------- tasks of both directions

# ioi and arc are accuracies (percentage points, higher is better); swear is lower-is-better, in
# percent of its unablated score (relative). Scores in display units, as evals_frame writes them.
MIXED_BASE = {"ioi": 90.0, "arc": 50.0, "swear": 100.0}
MIXED_HIGHER = {"ioi": True, "arc": True, "swear": False}
MIXED_CAPS = {"ioi": "language", "swear": "language", "arc": "general"}
MIXED_RUNS = {  # searched task -> scores on (ioi, arc, swear) for k = 1, 2
    # k = 1 improves both other tasks (arc +2, swear 100 -> 97); k = 2: arc +20, swear worse by 1.18 %
    "ioi": [(60.0, 52.0, 97.0), (40.0, 70.0, 101.18)],
    "swear": [(90.0, 49.0, 130.0)],  # swear's own heads make it worse: 30 % more profanity
}
MIXED_UNITS = {"ioi": ["points", "acc"], "arc": ["points", "acc"], "swear": ["relative", "profane_words"]}


def mixed_evals() -> pd.DataFrame:
    rows = []
    for task, by_k in MIXED_RUNS.items():
        for k, scores in enumerate([tuple(MIXED_BASE.values()), *by_k]):
            rows += [dict(model="m", kind="task", task=task, capability=MIXED_CAPS[task], method="cs",
                          search=f"{task}_s", k=k, headset="none" if k == 0 else f"L0H{k}", eval_task=eval_task,
                          eval_capability=MIXED_CAPS[eval_task], score=score, higher_is_better=MIXED_HIGHER[eval_task])
                     for eval_task, score in zip(MIXED_BASE, scores)]
    for eval_task, score in zip(MIXED_BASE, (91.0, 50.0, 110.0)):  # a universal head: swear 10 % worse
        rows.append(dict(model="m", kind="universal", task="", capability="", method="", search="", k=1,
                         headset="L3H3", eval_task=eval_task, eval_capability=MIXED_CAPS[eval_task], score=score,
                         higher_is_better=MIXED_HIGHER[eval_task]))
    return tsv_round_trip(pd.DataFrame(rows))


def oriented(task: str, score: float) -> float:
    """The change of ``task`` against its baseline, negative when worse (independent of headloc)."""
    change = score - MIXED_BASE[task]
    return change if MIXED_HIGHER[task] else -change


def test_delta_gen_orients_each_task_so_that_negative_is_worse():
    """Heads that improve both other tasks have a positive Delta Gen (raw changes would average arc's
    +2 with swear's -3: -0.5, read as damage), and a 20-point improvement no longer absorbs a 1.18 %
    worsening as another improvement (raw: +10.59). A lower-is-better searched task's own Delta Task
    is negative when its heads make it worse (swear 100 -> 130: -30, raw +30)."""
    t2 = table2(mixed_evals(), k=2).set_index("task")
    assert t2.loc["ioi", "delta_task"] == pytest.approx(40.0 - 90.0)
    assert t2.loc["ioi", "delta_gen"] == pytest.approx((20.0 + -1.18) / 2)  # 9.41
    assert t2.loc["swear", "delta_task"] == pytest.approx(-30.0)
    assert t2.loc["swear", "delta_gen"] == pytest.approx((0.0 + -1.0) / 2)
    ioi = delta.deltas(mixed_evals()).query("task == 'ioi'")
    np.testing.assert_allclose(ioi["delta_gen"], [0.0, (2.0 + 3.0) / 2, (20.0 - 1.18) / 2])
    expected = {(t, k): np.mean([oriented(e, s) for e, s in zip(MIXED_BASE, scores) if e != t])
                for t, by_k in MIXED_RUNS.items() for k, scores in enumerate(by_k, 1)}
    t6 = table6(mixed_evals()).query("n_heads != 'BL'")
    assert dict(zip(zip(t6["task"], t6["n_heads"]), t6["delta_gen"])) == pytest.approx(expected)


def test_every_table_and_figure_of_deltas_is_oriented():
    """Table 3's per-task change, Table 4's deltas, Tables 5 and 7's per-head changes and Figure 2's
    lines come from the same oriented deltas: each negative where the task got worse."""
    evals = mixed_evals()
    t3 = table3(evals, k=1).query("id_on == 'ioi'").set_index("eval_on")
    assert t3["delta_task"].to_dict() == pytest.approx({"ioi": -30.0, "swear": oriented("swear", 97.0)})  # +3
    recoveries = pd.DataFrame({"model": "m", "task": ["ioi", "swear"], "method": "cs", "search": ["ioi_s", "swear_s"],
                               "top_heads": ["L0H1, L0H2", "L0H1"], "n_evals": 100})
    t4 = table4(evals, recoveries, k=2).set_index("task")
    assert (t4.loc["swear", "delta_task"], t4.loc["ioi", "delta_gen"]) == pytest.approx((-30.0, (20 - 1.18) / 2))
    t7 = table7(evals).set_index("head")
    assert t7.loc["L3H3", ["ioi", "arc", "swear"]].astype(float).tolist() == [1.0, 0.0, -10.0]
    t5 = table5(evals, capabilities=MIXED_CAPS).set_index("head")
    assert t5.loc["L3H3", "delta_language"] == pytest.approx((1.0 - 10.0) / 2)
    fig = figure2(evals, capability="language", method="cs")
    lines = {line.get_label(): np.asarray(line.get_ydata(), dtype=float).tolist() for line in fig.axes[0].lines}
    assert lines[r"$\Delta$ swear"] == pytest.approx([0.0, 3.0, -1.18])
    assert lines[r"$\Delta$ Gen"] == pytest.approx([0.0, (2.0 + 3.0) / 2, (20.0 - 1.18) / 2])
    assert fig.axes[0].get_ylabel() == r"$\Delta$ (negative = worse)"


def test_the_captions_say_how_each_task_enters_the_deltas():
    options = ReportOptions(top_k=2, method="cs", units=MIXED_UNITS, directions=MIXED_HIGHER)
    entering = ("; negative = worse, each task entering as ioi (acc, percentage points), arc (acc, percentage "
                "points), swear (profane_words, % of unablated, lower is better: sign flipped)")
    assert TABLES["table2"].title(options) == (  # swear is no percentage points: each task in its unit
        "Table 2. Change in task score (Delta Task) and in the mean of the other tasks (Delta Gen), in each "
        "task's unit, top 2 heads (method cs) ablated" + entering)
    assert TABLES["table3"].title(options).endswith("same capability (eval on); in each task's unit" + entering)
    assert "percentage points" not in "".join(TABLES[f"table{n}"].title(options).split(";")[0] for n in (4, 5, 7, 8))
    points = ReportOptions(top_k=2, method="cs", units={"ioi": ["points", "acc"]}, directions={"ioi": True})
    assert TABLES["table7"].title(points).startswith("Table 7. Universal heads: unablated scores (BL) and the change "
                                                     "on every task when one head is ablated (percentage points);")
    assert [name for name, spec in TABLES.items() if spec.title(options).endswith(entering)] == [
        f"table{n}" for n in range(2, 9)]  # every table of deltas, and no other
    assert TABLES["table1"].title(options).endswith("each model; not in percentage points: swear in percent of "
                                                    "its unablated score")
    fig = FIGURES["fig2"].build({"evals_main": mixed_evals()}, options)
    assert " ".join(fig._suptitle.get_text().split()) == entering[2:]  # broken into lines that fit the figure
    higher = ReportOptions(units=MIXED_UNITS, directions={**MIXED_HIGHER, "swear": True})
    assert "sign flipped" not in TABLES["table2"].title(higher)


def test_a_direction_that_is_not_a_boolean_is_refused_by_the_report():
    evals = mixed_evals()
    with pytest.raises(ValueError, match="evals is missing required column\\(s\\): higher_is_better"):
        table2(evals.drop(columns="higher_is_better"))
    evals["higher_is_better"] = evals["higher_is_better"].astype(object)
    evals.loc[evals["eval_task"] == "swear", "higher_is_better"] = "false"
    with pytest.raises(ValueError, match="evals: eval_task 'swear' has higher_is_better 'false'; expected True or "
                                         "False"):
        table2(evals)
    with pytest.raises(ValueError, match="directions must map each task to True or False .* \\{'swear': 'false'\\}"):
        ReportOptions(directions={"ioi": True, "swear": "false"})


def test_shared_heads_rows_pairs_and_baseline(pevals):
    rows, pairs = delta.shared_heads(pevals, "universal")
    assert pairs == [("m1", "L0H3"), ("m1", "L1H2")]  # sorted by (layer, head)
    mine = rows[(rows["headset"] == "L1H2")].set_index("eval_task")["delta"]
    np.testing.assert_allclose(mine[TASKS], np.subtract(UNIVERSAL["L1H2"], BASE))
    rows, pairs = delta.shared_heads(pevals[pevals["kind"] == "task"], "knowledge")
    assert rows.empty and pairs == []
    assert sorted(["L10H0", "L2H5+L0H0", "L2H1"], key=delta.headset_key) == [
        "L2H1", "L2H5+L0H0", "L10H0"]


def test_no_report_module_imports_another_ones_private_names():
    import ast
    from pathlib import Path

    import headloc.report

    for path in Path(headloc.report.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("headloc"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


# ---------------------------------------------------------------- the registry of tables/figures

# a collected models table and tuning grid, as the collect rules write them
MODELS_FRAME = pd.DataFrame({"model": ["m1"], "source": ["x"], "n_layers": [10], "n_heads": [10],
                             "n_kv_heads": [5], "total": [100]})
TUNING_FRAME = pd.DataFrame({
    "model": "m1", "task": "gsm8k", "method": "cs_stratified", "n_masks": [100, 200],
    "sparsity": 0.05, "search": ["a", "b"], "top_heads": ["L1H2", "L3H4"], "baseline": 80.0,
    "ablated": [60.0, 40.0], "degradation": [-20.0, -40.0], "chosen": [False, True]})

OPTIONS = ReportOptions(
    top_k=5, gen_tasks=("boolq", "mmlu"), method="cs_stratified", capabilities=CAPS,
    knowledge_tasks=("wmdp_bio",), knowledge_eval_tasks=("mmlu", "wmdp_bio"),
)
# today's inputs, about lines and titles (rules/common.smk TABLES/FIGURES, scripts/render_table.py)
INPUTS = {
    "table1": ("models",), "table2": ("evals_main", "recoveries_main"), "table3": ("evals_main", "recoveries_main"),
    "table4": ("evals_methods", "recoveries"), "table5": ("evals_universal",),
    "table6": ("evals_main",), "table7": ("evals_universal",), "table8": ("evals_knowledge",),
    "table9": ("recoveries",), "table10": ("recoveries_main",), "tuning": ("tuning",),
    "fig1": ("evals_main",), "fig2": ("evals_main",), "fig3": ("evals_knowledge",),
    "fig4": ("evals_main",), "methods": ("evals_methods", "recoveries"),
}
ABOUT = {
    "table1": "Layers, heads per layer and total heads of every model.",
    "table2": "Delta Task and Delta Gen of the top-k task-specific heads.",
    "table3": "Heads found on one dataset, evaluated on the others of its capability.",
    "table4": "Search methods compared: Delta Task, Delta Gen, evaluations used, recall of greedy's top k.",
    "table5": "Universal heads: mean Delta per capability.",
    "table6": "Degradation against the number of heads ablated.",
    "table7": "Universal heads: Delta on every task.",
    "table8": "Knowledge multiple-choice heads: Delta on every task.",
    "table9": "Heads found by every method on every task.",
    "table10": "Heads found by the main method, per model and task.",
    "tuning": "Hyperparameter search of appendix A.1.",
    "fig1": "Every task's score with the top-k heads of one capability ablated.",
    "fig2": "Degradation against the number of heads ablated, for one capability.",
    "fig3": "Knowledge multiple-choice heads ablated alone.",
    "fig4": "Localization of the knowledge tasks (WMDP) in one model.",
    "methods": "Delta Task of each method's top k against the evaluations it used (log scale).",
}
TITLES = {  # with OPTIONS, then with ReportOptions() where the title depends on the run
    "table1": "Table 1. Layers L, heads per layer H and total heads N of each model",
    "table2": "Table 2. Change in task score (Delta Task) and in the mean of boolq, mmlu (Delta "
              "Gen), percentage points, top 5 heads (method cs_stratified) ablated",
    "table3": "Table 3. Heads identified on one task (id on), top 5 (method cs_stratified) "
              "ablated, evaluated on every task of the same capability (eval on); percentage "
              "points",
    "table4": "Table 4. Every search method: Delta Task, Delta Gen (top 5 heads ablated, "
              "percentage points), the number of evaluations it needed, the share of greedy's top 5 "
              "it found (recall), and the deltas of its own top 5 with universal heads kept (unfiltered)",
    "table5": "Table 5. Universal heads: mean change per capability when one head is ablated "
              "(percentage points)",
    "table6": "Table 6. Score and degradation against the number of top heads (method "
              "cs_stratified) ablated (BL = unablated)",
    "table7": "Table 7. Universal heads: unablated scores (BL) and the change on every task "
              "when one head is ablated (percentage points)",
    "table8": "Table 8. Knowledge multiple-choice heads: unablated scores (BL) and the change "
              "when one head is ablated, knowledge MC tasks grouped apart (percentage points)",
    "table9": "Table 9. Top 5 heads identified by every method, per model and task",
    "table10": "Table 10. Top 5 heads per model and task (method cs_stratified, most damaging "
               "first)",
    "tuning": "Hyperparameter search (appendix A.1): degradation on the identification subset "
              "per number of masks and sparsity, in the scoring metric's unit (percentage points for a "
              "fraction); chosen = largest degradation in the metric's direction",
    "fig1": "Figure 1", "fig2": "Figure 2", "fig3": "Figure 3", "fig4": "Figure 4",
    "methods": "Methods: Delta Task of the top 5 against evaluations used",
}
DEFAULT_TITLES = {
    "table2": "Table 2. Change in task score (Delta Task) and in the mean of the other tasks "
              "(Delta Gen), percentage points, top 5 heads (every method) ablated",
    "table3": "Table 3. Heads identified on one task (id on), top 5 (every method) ablated, "
              "evaluated on every task of the same capability (eval on); percentage points",
    "table6": "Table 6. Score and degradation against the number of top heads (every method) "
              "ablated (BL = unablated)",
    "table9": "Table 9. Top 5 heads identified by every method, per model and task",
    "table10": "Table 10. Top 5 heads per model and task (every method, most damaging first)",
}


def report_frames(pevals: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every collected table a spec may read, small and hand-made, as the scripts read them."""
    greedy = pevals[(pevals["kind"] == "task") & (pevals["task"] == "gsm8k")].copy()
    greedy["method"], greedy["search"] = "greedy", "g"
    greedy.loc[greedy["k"] > 0, "score"] -= 5
    recoveries = pd.DataFrame({
        "model": "m1", "task": ["gsm8k", "gsm8k", "arith", "wmdp_bio"],
        "capability": ["math", "math", "math", "knowledge"],
        "method": ["cs_stratified", "greedy", "cs_stratified", "cs_stratified"],
        "search": ["cs", "g", "cs", "cs"],
        "top_heads": ["L9H0,L9H1", "L9H1,L9H0", "L9H0", "L9H0"], "n_evals": [100, 5120, 200, 300],
        "r2": 0.5, "alpha": 0.01})
    models, tuning = MODELS_FRAME.copy(), TUNING_FRAME.copy()
    named = {"evals_main": pevals, "evals_methods": pd.concat([pevals, greedy], ignore_index=True),
             "evals_universal": pevals, "evals_knowledge": pevals, "recoveries": recoveries,
             "recoveries_main": recoveries, "models": models, "tuning": tuning}
    return {name: tsv_round_trip(frame) for name, frame in named.items()}


def columns_pattern(columns: tuple[str, ...]) -> re.Pattern:
    """A spec's columns as a regex over ``"," + ",".join(columns)``; "{name}": one or more."""
    parts = []
    for column in columns:
        literal = [re.escape(piece) for piece in re.split(r"\{\w+\}", column)]
        parts.append(f"(?:,{'[^,]+'.join(literal)})+" if len(literal) > 1 else f",{literal[0]}")
    return re.compile("".join(parts))


def test_registry_names_inputs_about_and_titles_as_today():
    assert list(TABLES) == ["table1", "table2", "table3", "table4", "table5", "table6", "table7",
                            "table8", "table9", "table10", "tuning"]
    assert list(FIGURES) == ["fig1", "fig2", "fig3", "fig4", "methods"]
    for name, spec in {**TABLES, **FIGURES}.items():
        assert spec.name == name
        assert spec.inputs == INPUTS[name], name
        assert spec.about == ABOUT[name], name
        assert spec.title(OPTIONS) == TITLES[name], name
        assert spec.title(ReportOptions()) == DEFAULT_TITLES.get(name, TITLES[name]), name


def test_the_tables_of_deltas_say_so():
    """The report's caption explains deltas for the tables that declare them (rules/report.smk):
    every table with a delta column, and Tables 7 and 8, whose per-task columns are deltas."""
    assert [name for name, spec in TABLES.items() if spec.deltas] == [f"table{n}" for n in range(2, 9)]
    for name, spec in TABLES.items():
        assert spec.deltas or not any(column.startswith("delta") for column in spec.columns), name


def test_every_table_spec_builds_its_declared_columns(pevals):
    given = report_frames(pevals)
    for name, spec in TABLES.items():
        table = spec.build(given, OPTIONS)
        assert len(table), name
        assert columns_pattern(spec.columns).fullmatch("," + ",".join(table.columns)), (
            name, list(table.columns), spec.columns)


def test_table_specs_pass_the_run_options_through(pevals):
    """Each spec equals its builder called with the options it depends on (hand-wired)."""
    given = report_frames(pevals)
    options = ReportOptions(top_k=1, gen_tasks=["boolq"], method="cs_stratified",
                            capabilities={"mbpp": "code", "gsm8k": "math"},
                            knowledge_eval_tasks=["wmdp_bio"])
    main, methods = given["evals_main"], given["evals_methods"]
    recoveries = given["recoveries"]
    expected = {
        "table1": table1(given["models"]),
        "table2": table2(main, k=1, gen_tasks=["boolq"], method="cs_stratified"),
        "table3": table3(main, k=1, gen_tasks=["boolq"], method="cs_stratified"),
        "table4": table4(methods, recoveries, k=1, gen_tasks=["boolq"]),
        "table5": table5(main, gen_tasks=["boolq"], capabilities={"mbpp": "code",
                                                                  "gsm8k": "math"}),
        "table6": table6(main, gen_tasks=["boolq"], method="cs_stratified"),
        "table7": table7(main),
        "table8": table8(main, ["wmdp_bio"]),
        "table9": table9(recoveries, k=1),
        "table10": table10(recoveries, k=1, method="cs_stratified"),
        "tuning": tuning_table(given["tuning"]),
    }
    for name, spec in TABLES.items():
        pd.testing.assert_frame_equal(spec.build(given, options), expected[name], obj=name)
    # and the options change the result: Table 4 with every method, Table 10 with the main one
    t4 = TABLES["table4"].build(given, options)
    assert t4["method"].tolist() == ["cs_stratified", "greedy", "cs_stratified", "cs_stratified"]
    np.testing.assert_allclose(t4["delta_task"], [-20, -25, -60, -6])  # k = 1
    assert TABLES["table10"].build(given, options)["heads"].tolist() == ["L9H0"] * 3
    assert TABLES["table5"].build(given, options).columns.tolist() == [
        "model", "head", "delta_code", "delta_math", "delta_knowledge", "delta_gen"]


def test_every_empty_table_carries_its_specs_note(pevals):
    empty = {name: frame.iloc[0:0] for name, frame in report_frames(pevals).items()}
    for name, spec in TABLES.items():
        table = spec.build(empty, OPTIONS)
        assert table.empty and table.attrs["note"] == spec.empty_note, name


def test_a_missing_input_is_named(pevals):
    given = report_frames(pevals)
    with pytest.raises(ValueError, match=r"^table4 needs input\(s\) 'recoveries' \(it reads "
                                         r"evals_methods, recoveries\); given: evals_methods$"):
        TABLES["table4"].build({"evals_methods": given["evals_methods"]}, OPTIONS)
    with pytest.raises(ValueError, match=r"'evals_methods', 'recoveries' .*given: evals_main"):
        TABLES["table4"].build({"evals_main": given["evals_main"]}, OPTIONS)
    with pytest.raises(ValueError, match=r"fig3 needs input\(s\) 'evals_knowledge'.*given: "
                                         r"nothing"):
        FIGURES["fig3"].build({}, OPTIONS)
    with pytest.raises(ValueError, match=r"inputs must be among .*; got evals_mian"):
        TableSpec(name="x", about="", inputs=("evals_mian",), columns=(), empty_note="",
                  caption="", builder=lambda evals, options: evals)


def test_every_figure_spec_builds_with_footer(pevals):
    given = report_frames(pevals)
    options = dataclasses.replace(OPTIONS, figure_model="m1", figure_capability="math")
    panels = {"fig1": 1, "fig2": 2, "fig3": 1, "fig4": 1, "methods": 3}
    for name, spec in FIGURES.items():
        fig = spec.build(given, options, footer=f"made by {name}")
        assert isinstance(fig, Figure) and len(fig.axes) == panels[name], name
        assert fig.texts[-1].get_text() == f"made by {name}"
        assert not any(t.get_text().startswith("no data") for t in fig.axes[0].texts), name
    fig1 = FIGURES["fig1"].build(given, options).axes[0]
    assert "top 2 gsm8k heads (cs_stratified)" in fig1.get_title()  # figure_capability: math
    assert FIGURES["fig4"].build(given, options).axes[0].get_title() == (
        "m1 / heads of wmdp_bio (cs_stratified)")  # knowledge_tasks


def test_empty_figures_show_their_specs_note_and_title(pevals):
    empty = {name: frame.iloc[0:0] for name, frame in report_frames(pevals).items()}
    for name, spec in FIGURES.items():
        (ax,) = spec.build(empty, ReportOptions()).axes
        assert ax.texts[0].get_text() == f"no data: {spec.empty_note}", name
        assert ax.get_title() == spec.title(ReportOptions()), name


def test_report_options_from_workflow_params():
    options = ReportOptions(**{"top_k": 3, "gen_tasks": ["boolq"], "method": None,
                               "capabilities": {"gsm8k": "math"}, "knowledge_tasks": None,
                               "knowledge_eval_tasks": ["mmlu"], "figure_model": "m",
                               "figure_capability": None})
    assert options.gen_tasks == ("boolq",) and options.knowledge_eval_tasks == ("mmlu",)
    assert options.knowledge_tasks == () and ReportOptions().gen_tasks is None
    assert options.caption_fields() == {"k": 3, "gen": "boolq", "main": "every method", "unit": "percentage points"}
    with pytest.raises(ValueError, match="gen_tasks must be a list of task names, got the "
                                         "string 'boolq'"):
        ReportOptions(gen_tasks="boolq")
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match=r"top_k must be an integer >= 0"):
            ReportOptions(top_k=bad)
    with pytest.raises(TypeError, match="n_masks"):
        ReportOptions(n_masks=3)


# ------------------------------------------------------- the render scripts, through Snakemake

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SAVE_DPI = 150  # scripts/render_figure.py: savefig(..., dpi=150, bbox_inches="tight")
TIGHT_PAD_IN = 0.1  # matplotlib's savefig.pad_inches: the tight crop's margin on every side


def pdf_pages(data: bytes) -> list[tuple[float, float]]:
    """(width, height) in points of each page of a PDF as matplotlib writes it (page objects are
    not compressed), after checking the PDF header."""
    assert data.startswith(b"%PDF-"), data[:16]
    pages = re.findall(rb"/Type\s*/Page(?![A-Za-z])", data)
    boxes = [[float(x) for x in box.split()]
             for box in re.findall(rb"/MediaBox\s*\[([^\]]*)\]", data)]
    assert len(boxes) == len(pages), (len(boxes), len(pages))
    return [(x1 - x0, y1 - y0) for x0, y0, x1, y1 in boxes]


def check_rendered_figure(folder, log, name: str, inches: tuple[float, float], panels: int) -> None:
    """``{name}.png`` and ``{name}.pdf`` as scripts/render_figure.py saves a figure of ``inches``
    with ``panels`` axes: a PNG at 150 dpi and a one-page PDF, both cropped to the drawing."""
    assert re.search(rf"\b{name} with {panels} panels$", log.read_text(), re.M), log.read_text()
    png = (folder / f"{name}.png").read_bytes()
    assert png.startswith(PNG_MAGIC), (name, png[:8])
    with Image.open(io.BytesIO(png)) as image:
        size, dpi, darkest = image.size, image.info["dpi"], image.convert("L").getextrema()[0]
    assert dpi == pytest.approx((SAVE_DPI, SAVE_DPI), abs=0.05), name
    # constrained layout fills the figure up to its small padding; the tight crop keeps that and
    # adds TIGHT_PAD_IN on each side, so each side is within [inches, inches + 2 pads] x dpi
    for pixels, length in zip(size, inches):
        assert length * SAVE_DPI - 1 <= pixels <= (length + 2 * TIGHT_PAD_IN) * SAVE_DPI + 1, (
            name, size, inches)
    assert darkest < 64, (name, darkest)  # text and axes are drawn, not a blank canvas
    pages = pdf_pages((folder / f"{name}.pdf").read_bytes())
    assert len(pages) == 1, (name, pages)
    # the PDF page is the same crop, in points (72 per inch)
    np.testing.assert_allclose(np.array(pages[0]) / 72 * SAVE_DPI, size, atol=2, err_msg=name)


def shown(value) -> str:
    """A cell as Markdown, LaTeX and HTML show it: one decimal, a missing number as "-"."""
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.1f}"
        return "0.0" if text == "-0.0" else text
    return str(value)


def check_rendered_table(folder, name: str, columns, rows, note: str | None = None) -> None:
    """``{name}.csv/.md/.tex/.html`` hold exactly ``rows`` under ``columns``: the CSV at full
    precision (a missing number or empty text as an empty field, floats compared approximately),
    the other three with every cell as :func:`shown` gives it, and ``note`` on an empty table."""
    with open(folder / f"{name}.csv", newline="") as handle:
        header, *lines = list(csv.reader(handle))
    assert header == list(columns), (name, header)
    assert len(lines) == len(rows), (name, lines)
    for line, row in zip(lines, rows):
        got = [float(cell) if isinstance(value, float) else cell for cell, value in zip(line, row)]
        want = [pytest.approx(value, rel=1e-9) if isinstance(value, float) else
                "" if value is None else str(value) for value in row]
        assert len(line) == len(row) and got == want, (name, line, row)

    md = (folder / f"{name}.md").read_text().splitlines()
    top = md.index("| " + " | ".join(columns) + " |")
    body = ["| " + " | ".join(shown(value) for value in row) + " |" for row in rows]
    body += ["", f"*{note}*"] if note else []
    assert md[top + 2:top + 2 + len(body)] == body and md[top + 2 + len(body)] == "", (name, md)

    def tex_row(cells):
        return " & ".join(shown(cell).replace("_", r"\_") for cell in cells) + r" \\"

    tex = (folder / f"{name}.tex").read_text().splitlines()
    top = tex.index(r"\midrule")
    body = [tex_row(row) for row in rows]
    body += [rf"\multicolumn{{{len(columns)}}}{{l}}{{\emph{{{note}}}}} \\"] if note else []
    assert tex[top - 1] == tex_row(columns), (name, tex)
    assert tex[top + 1:top + 2 + len(body)] == [*body, r"\bottomrule"], (name, tex)

    page = (folder / f"{name}.html").read_text()
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(columns))]
    for row in rows:
        cells = "".join(('<td class="num">' if num else "<td>") + html.escape(shown(value))
                        + "</td>" for value, num in zip(row, numeric))
        assert f"<tr>{cells}</tr>" in page.splitlines(), (name, cells)
    assert page.count("<tr>") == 1 + len(rows), name  # the header row and one per table row
    assert ('<p class="note">' in page) == bool(note), name
    assert not note or f'<p class="note">{html.escape(note)}</p>' in page, name


def mean(*values: float) -> float:
    return sum(values) / len(values)


def task_delta(task: str, k: int, eval_task: str) -> float:
    """Change on ``eval_task`` with the top ``k`` heads of ``task``'s search ablated."""
    i = TASKS.index(eval_task)
    return float(TASK_RUNS[task][k - 1][i] - BASE[i])


def task_gen(task: str, k: int) -> float:
    return mean(*(task_delta(task, k, t) for t in GEN))


def head_deltas(scores) -> dict[str, float]:
    """Eval task -> change with one shared head ablated (UNIVERSAL, KNOWLEDGE)."""
    return {t: float(score - base) for t, score, base in zip(TASKS, scores, BASE)}


def expected_tables() -> dict[str, tuple[tuple[str, ...], list[tuple]]]:
    """Every table of the render test's "full" case, from the data above and the Snakefile's
    options (top_k 5: each search's largest k; gen GEN; method cs_stratified; knowledge eval
    tasks mmlu, wmdp_bio): name -> (columns, rows). None is a missing number."""
    searched = [(task, len(by_k)) for task, by_k in TASK_RUNS.items()]  # (task, largest k)
    top = {"gsm8k": "L9H0, L9H1", "arith": "L9H0", "wmdp_bio": "L9H0"}  # recoveries' top_heads
    base = dict(zip(TASKS, map(float, BASE)))
    universal = {head: head_deltas(scores)  # by (layer, head): L0H3, L1H2
                 for head, scores in sorted(UNIVERSAL.items())}
    (knowledge,) = [head_deltas(scores) for scores in KNOWLEDGE.values()]
    mc, other = ["mmlu", "wmdp_bio"], ["gsm8k", "arith", "mbpp", "boolq"]
    return {
        "table1": (("model", "layers", "heads", "total"), [("m1", 10, 10, 100)]),
        "table2": (("capability", "model", "task", "search", "k", "delta_task", "delta_gen"),
                   [(CAPS[t], "m1", t, "cs", k, task_delta(t, k, t), task_gen(t, k))
                    for t, k in searched]),
        # each search's heads on its own task, then on the other eval tasks of its capability
        "table3": (("capability", "model", "id_on", "eval_on", "search", "k", "delta_task",
                    "delta_gen"),
                   [(CAPS[t], "m1", t, e, "cs", k, task_delta(t, k, e), task_gen(t, k))
                    for t, k, e in (("gsm8k", 2, "gsm8k"), ("gsm8k", 2, "arith"),
                                    ("arith", 1, "arith"), ("arith", 1, "gsm8k"),
                                    ("wmdp_bio", 1, "wmdp_bio"), ("wmdp_bio", 1, "mmlu"))]),
        # no greedy search: no recall; no kind "unfiltered" rows: unfiltered = filtered
        "table4": (("capability", "model", "task", "method", "search", "n_evals", "k",
                    "delta_task", "delta_gen", "recall", "delta_task_unfiltered",
                    "delta_gen_unfiltered"),
                   [(CAPS[t], "m1", t, "cs_stratified", "cs", 100, k, task_delta(t, k, t),
                     task_gen(t, k), None, task_delta(t, k, t), task_gen(t, k))
                    for t, k in searched]),
        # general (boolq) is all in GEN: no column; knowledge means mmlu and wmdp_bio
        "table5": (("model", "head", "delta_math", "delta_code", "delta_knowledge", "delta_gen"),
                   [("m1", head, mean(d["gsm8k"], d["arith"]), d["mbpp"],
                     mean(d["mmlu"], d["wmdp_bio"]), mean(*(d[t] for t in GEN)))
                    for head, d in universal.items()]),
        "table6": (("capability", "model", "task", "search", "n_heads", "score", "delta_task",
                    "delta_gen"),
                   [row for t, k in searched for row in [
                       (CAPS[t], "m1", t, "cs", "BL", base[t], None, None),
                       *((CAPS[t], "m1", t, "cs", j, float(TASK_RUNS[t][j - 1][TASKS.index(t)]),
                          task_delta(t, j, t), task_gen(t, j)) for j in range(1, k + 1))]]),
        "table7": (("model", "head", *TASKS, "avg"),
                   [("m1", "BL", *base.values(), mean(*base.values()))]
                   + [("m1", head, *d.values(), mean(*d.values()))
                      for head, d in universal.items()]),
        "table8": (("model", "head", *mc, "knowledge_mc_avg", *other, "other_avg"),
                   [("m1", name, *(d[t] for t in mc), mean(*(d[t] for t in mc)),
                     *(d[t] for t in other), mean(*(d[t] for t in other)))
                    for name, d in (("BL", base), ("L0H22", knowledge))]),
        "table9": (("model", "capability", "task", "method", "search", "heads", "n_evals"),
                   [("m1", CAPS[t], t, "cs_stratified", "cs", top[t], 100) for t, _ in searched]),
        "table10": (("model", "task", "method", "search", "heads", "n_evals"),
                    [("m1", t, "cs_stratified", "cs", top[t], 100) for t, _ in searched]),
        # TUNING_FRAME by n_masks; chosen: the largest degradation (search b)
        "tuning": (("model", "task", "method", "n_masks", "sparsity", "top_heads", "baseline",
                    "ablated", "degradation", "chosen"),
                   [("m1", "gsm8k", "cs_stratified", 100, "0.05", "L1H2", 80.0, 60.0, -20.0,
                     ""),
                    ("m1", "gsm8k", "cs_stratified", 200, "0.05", "L3H4", 80.0, 40.0, -40.0,
                     "yes")]),
    }


# (case, figure) -> (size in inches, panels), as headloc.report.figures sizes them for this data
RENDERED_FIGURES = {
    # one axes: per eval task (6) and the gen pair, max(5, 0.75 * labels + 1.5) wide
    ("full", "fig1"): ((0.75 * (len(TASKS) + 1) + 1.5, 3.4), 1),
    ("full", "fig2"): ((2 * 3.4, 2.8), 2),  # a 3.4 x 2.8 panel per math search: gsm8k, arith
    ("full", "fig3"): ((1.1 * 3 + 1.5, 3.2), 1),  # one model; groups mmlu, wmdp_bio, gen
    ("full", "fig4"): ((3.4, 2.8), 1),  # wmdp_bio, the one knowledge task
    ("full", "methods"): ((3 * 4.2, 3.2), 3),  # a 4.2 x 3.2 panel per recovery's (model, task)
    ("bare", "fig3"): ((5.0, 3.0), 1),  # the no-data figure
}


RENDER_SNAKEFILE = """
from headloc import report

OPTIONS = dict(
    top_k=5, gen_tasks={gen!r}, method="cs_stratified", capabilities={caps!r},
    knowledge_tasks=["wmdp_bio"], knowledge_eval_tasks=["mmlu", "wmdp_bio"],
    figure_model=None, figure_capability=None,
)


def spec_inputs(registry, name, case):
    return {{key: f"{{case}}/{{key}}.tsv" for key in registry[name].inputs}}


rule all:
    input:
        expand("full/{{table}}.md", table=list(report.TABLES)),
        expand("full/{{figure}}.png", figure=list(report.FIGURES)),
        expand("bare/{{table}}.md", table=["table7", "tuning"]),
        expand("bare/{{figure}}.png", figure=["fig3"]),


rule render_table:
    input:
        unpack(lambda wildcards: spec_inputs(report.TABLES, wildcards.table, wildcards.case)),
    output:
        md="{{case}}/{{table}}.md",
        csv="{{case}}/{{table}}.csv",
        tex="{{case}}/{{table}}.tex",
        html="{{case}}/{{table}}.html",
    log:
        "logs/{{case}}/{{table}}.log",
    params:
        options=OPTIONS,
    script:
        "{repo}/scripts/render_table.py"


rule render_figure:
    input:
        unpack(lambda wildcards: spec_inputs(report.FIGURES, wildcards.figure, wildcards.case)),
    output:
        png="{{case}}/{{figure}}.png",
        pdf="{{case}}/{{figure}}.pdf",
    log:
        "logs/{{case}}/{{figure}}.log",
    wildcard_constraints:
        figure="fig[0-9]+|methods",
    params:
        options=OPTIONS,
    script:
        "{repo}/scripts/render_figure.py"
"""


@pytest.mark.slow
def test_render_scripts_write_every_table_and_figure(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    full = paper_evals()
    recoveries = pd.DataFrame({
        "model": "m1", "task": list(TASK_RUNS), "capability": [CAPS[t] for t in TASK_RUNS],
        "method": "cs_stratified", "search": "cs", "top_heads": ["L9H0,L9H1", "L9H0", "L9H0"],
        "n_evals": 100, "r2": 0.5, "alpha": 0.01})
    models, tuning = MODELS_FRAME.copy(), TUNING_FRAME.copy()
    task_only = full[full["kind"] == "task"]
    cases = {
        "full": {"evals_main": full, "evals_methods": full, "evals_universal": full,
                 "evals_knowledge": full, "recoveries": recoveries, "recoveries_main": recoveries,
                 "models": models,
                 "tuning": tuning},
        "bare": {"evals_universal": task_only, "evals_knowledge": task_only,
                 "tuning": tuning.iloc[0:0]},
    }
    for case, named in cases.items():
        (tmp_path / case).mkdir()
        for name, frame in named.items():
            frame.to_csv(tmp_path / case / f"{name}.tsv", sep="\t", index=False)
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(RENDER_SNAKEFILE.format(gen=GEN, caps=CAPS, repo=repo))
    from conftest import CORES  # this worker's share of the cores

    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(snakefile), "--cores", CORES, "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    t3 = pd.read_csv(tmp_path / "full" / "table3.csv")
    np.testing.assert_allclose(t3["delta_task"], [-40, -30, -60, -10, -6, -1])
    t5 = pd.read_csv(tmp_path / "full" / "table5.csv")
    np.testing.assert_allclose(t5["delta_math"], [-1, -70])
    md = (tmp_path / "full" / "table8.md").read_text()
    assert "| m1 | L0H22 | -21.0 | -30.0 | -25.5 |" in md
    assert md.splitlines()[-1] == ("made by rule render_table (table8) with "
                                   "scripts/render_table.py from full/evals_knowledge.tsv")
    md2 = (tmp_path / "full" / "table2.md").read_text().split("\n\n")  # title, table, footer
    assert " ".join(md2[0].splitlines()) == f"**{TITLES['table2']}**"  # the run's gen tasks, k and main method
    assert " ".join(md2[-1].split()).endswith("from full/evals_main.tsv, full/recoveries_main.tsv")
    page = (tmp_path / "full" / "table8.html").read_text()  # what Snakemake's HTML report shows
    assert page.count("<h3>") == 1 and "<h3>Table 8." in page and "made by rule render_table (table8)" in page
    assert '<td>m1</td><td>L0H22</td><td class="num">-21.0</td><td class="num">-30.0</td>' in page
    bare7_html = (tmp_path / "bare" / "table7.html").read_text()
    assert "<p class=\"note\">no universal heads in evals (kind == &#x27;universal&#x27;)</p>" in bare7_html
    md4 = (tmp_path / "full" / "table4.md").read_text().split("\n\n")
    assert " ".join(md4[-1].split()).endswith("from full/evals_methods.tsv, full/recoveries.tsv")
    assert "\\caption{Table 9. Top 5 heads" in (tmp_path / "full" / "table9.tex").read_text()
    assert (tmp_path / "full" / "table1.tex").read_text().count(r"\\") >= 2
    assert "| yes |" in (tmp_path / "full" / "tuning.md").read_text()
    for case, names in (("full", ["fig1", "fig2", "fig3", "fig4", "methods"]), ("bare", ["fig3"])):
        for name in names:
            for suffix in ("png", "pdf"):
                assert (tmp_path / case / f"{name}.{suffix}").stat().st_size > 0
    for (case, name), (inches, panels) in RENDERED_FIGURES.items():
        check_rendered_figure(tmp_path / case, tmp_path / "logs" / case / f"{name}.log", name,
                              inches, panels)
    bare7 = (tmp_path / "bare" / "table7.md").read_text()
    assert "*no universal heads in evals (kind == 'universal')*" in bare7
    assert (tmp_path / "bare" / "table7.csv").read_text() == "model,head,avg\n"
    assert "no hyperparameter search" in (tmp_path / "bare" / "tuning.md").read_text()
    expected = expected_tables()
    assert list(expected) == list(TABLES)
    for name, (columns, rows) in expected.items():
        check_rendered_table(tmp_path / "full", name, columns, rows)
    check_rendered_table(tmp_path / "bare", "table7", ("model", "head", "avg"), [],
                         note="no universal heads in evals (kind == 'universal')")
    check_rendered_table(tmp_path / "bare", "tuning", expected["tuning"][0], [],
                         note="no hyperparameter search configured (tuning.tasks is empty)")


def test_table4_recall_and_unfiltered_deltas_by_hand():
    # ioi: baseline 90 (own), 60 (gen). Greedy's top 2 {L1H1, L2H2}; cs finds L2H2 and L3H3 (recall 1/2);
    # unfiltered, cs's own top 2 hold universal L0H0 (ioi 10, gen 30) where the filtered heads give 40 / 55.
    rows = []
    for kind, method, search, heads_score in [
            ("task", "greedy", "g", (20.0, 50.0)), ("task", "cs", "c", (40.0, 55.0)),
            ("unfiltered", "cs", "c", (10.0, 30.0))]:
        for k, (own, gen) in ((0, (90.0, 60.0)), (2, heads_score)):
            rows += [{"model": "m", "kind": kind, "task": "ioi", "method": method, "search": search, "k": k,
                      "eval_task": "ioi", "score": own, "higher_is_better": True},
                     {"model": "m", "kind": kind, "task": "ioi", "method": method, "search": search, "k": k,
                      "eval_task": "gen", "score": gen, "higher_is_better": True}]
    evals = pd.DataFrame(rows)
    recoveries = pd.DataFrame({"model": "m", "task": "ioi", "method": ["greedy", "cs"], "search": ["g", "c"],
                               "top_heads": ["['L1H1', 'L2H2']", "['L2H2', 'L3H3']"], "n_evals": [1341, 100]})
    out = table4(evals, recoveries, k=2).set_index("method")
    assert out.loc["cs", "recall"] == 0.5 and out.loc["greedy", "recall"] == 1.0
    assert (out.loc["cs", "delta_task"], out.loc["cs", "delta_gen"]) == (-50.0, -5.0)
    assert (out.loc["cs", "delta_task_unfiltered"], out.loc["cs", "delta_gen_unfiltered"]) == (-80.0, -30.0)
    # greedy has no unfiltered rows (it never chose a universal head): NaN, not its filtered value
    assert np.isnan(out.loc["greedy", "delta_task_unfiltered"])
    assert out.loc["cs", "n_evals"] == 100


def test_methods_figure_points_average_repeats():
    from headloc.report import methods_figure
    from headloc.report.figures import methods_points
    rows = []
    for search, own in (("r0", 50.0), ("r1", 70.0)):
        for k, score in ((0, 90.0), (5, own)):
            rows.append({"model": "m", "kind": "task", "task": "t", "method": "cs_bernoulli", "search": search,
                         "k": k, "eval_task": "t", "score": score, "higher_is_better": True})
    evals = pd.DataFrame(rows)
    recoveries = pd.DataFrame({"model": "m", "task": "t", "method": "cs_bernoulli", "search": ["r0", "r1"],
                               "top_heads": ["L0H0", "L0H1"], "n_evals": [50, 50]})
    point = methods_points(evals, recoveries).iloc[0]
    assert (point["n_evals"], point["delta_task"], point["spread"], point["runs"]) == (50, -30.0, 10.0, 2)
    ax = methods_figure(evals, recoveries).axes[0]
    (bars,) = ax.containers
    assert bars.lines[0].get_xydata().tolist() == [[50.0, -30.0]]
    segment = bars.lines[2][0].get_segments()[0]  # the +-1 standard deviation bar
    assert segment.tolist() == [[50.0, -40.0], [50.0, -20.0]]


def test_methods_figure_draws_a_method_without_evaluations_across_the_panel():
    """A zero-cost method (a random draw) has no place on the log axis: a dotted line at its mean
    Delta Task over the repeats, its +-1 standard deviation shaded, in the legend."""
    from matplotlib.patches import Rectangle

    from headloc.report import methods_figure

    rows = [{"model": "m", "kind": "task", "task": "t", "method": method, "search": search, "k": k,
             "eval_task": "t", "score": score, "higher_is_better": True}
            for method, search, own in (("cs_stratified", "c0", 40.0), ("free", "f0", 85.0), ("free", "f1", 75.0))
            for k, score in ((0, 90.0), (5, own))]
    recoveries = pd.DataFrame({"model": "m", "task": "t", "method": ["cs_stratified", "free", "free"],
                               "search": ["c0", "f0", "f1"], "top_heads": ["L0H0", "L0H1", "L0H2"],
                               "n_evals": [50, 0, 0]})
    fig = methods_figure(pd.DataFrame(rows), recoveries)
    ax = fig.axes[0]
    (bars,) = ax.containers  # only the method with a cost is a point
    assert bars.lines[0].get_xydata().tolist() == [[50.0, -50.0]]
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert [line.get_ydata()[0] for line in dotted] == [-10.0]  # mean of -5 and -15
    band = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_alpha() == 0.12]
    assert len(band) == 1 and (band[0].get_y(), band[0].get_height()) == pytest.approx((-15.0, 10.0))
    assert "free (no evaluations)" in [text.get_text() for text in fig.legends[0].get_texts()]


# ---------------------------------------------------------------- heads a search did not confirm


def test_tables_mark_the_shown_top_heads_a_search_did_not_confirm():
    """A capped group testing search confirmed L1H1 and L2H2, its own top 2; the universal filter
    drops L1H1 (a universal head), so its shown top 2 are L2H2 and L3H3, which it never confirmed.
    The tables check the heads they show, not the record's own top k: Table 9 marks L3H3 with ?,
    Table 2 lists it under the table; compressed sensing confirms no head, so nothing of it is marked."""
    from headloc.workflow.results import evals_frame, recoveries_frame, selections

    base = {"model": "m", "task": "ioi", "n_evals": 25, "r2": None, "alpha": None, "warnings": [], "coef": {}}
    capped = {**base, "method": "group_testing", "search": "gt", "ranking": ["L1H1", "L2H2", "L3H3", "L4H4"],
              "top_heads": ["L1H1", "L2H2"], "confirmed": ["L1H1", "L2H2"]}
    lasso = {**base, "method": "cs_stratified", "search": "cs", "ranking": ["L1H1", "L4H4", "L3H3", "L2H2"],
             "top_heads": ["L1H1", "L4H4"], "confirmed": None}
    chosen = selections([capped, lasso], main={"ioi": "gt"}, capabilities={"ioi": "syntax"}, k=2,
                        universal={"top_n": 1, "min_capabilities": 1, "filter": True, "heads": {"m": ["L1H1"]}},
                        knowledge={"tasks": [], "top_n": 5, "min_tasks": None})
    frame = recoveries_frame([capped, lasso], chosen, {"ioi": "syntax"})
    assert frame["unconfirmed"].tolist() == [["L3H3"], []]
    for column in ("top_heads", "unconfirmed"):  # as rule collect_recoveries writes recoveries.tsv
        frame[column] = frame[column].str.join(",")
    recoveries = tsv_round_trip(frame)
    options = ReportOptions(top_k=2, method="group_testing", capabilities={"ioi": "syntax"})

    t9 = TABLES["table9"].build({"recoveries": recoveries}, options)
    assert t9.set_index("search")["heads"].to_dict() == {"gt": "L2H2, L3H3?", "cs": "L4H4, L3H3"}
    assert t9.attrs["note"].startswith("?: a head its search did not confirm (group testing: not ablated alone before its cap")
    assert f"*{t9.attrs['note']}*" in " ".join(to_markdown(t9, title="t9", footer="f").split())  # notes wrap

    evals = [{"model": "m", "task": "ioi", "headset": headset, "value": value}
             for headset, value in (("none", 0.9), ("L2H2", 0.7), ("L2H2+L3H3", 0.5))]
    main = [s for s in chosen if s["kind"] == "task" and s["search"] == "gt"]
    t2 = TABLES["table2"].build({"evals_main": tsv_round_trip(evals_frame(main, evals, directions={"ioi": True})),
                                 "recoveries_main": recoveries}, options)
    assert t2["delta_task"].tolist() == pytest.approx([-40.0])
    assert t2.attrs["note"].startswith("Unconfirmed top heads, m ioi (gt): L3H3. Each is a head its search did not confirm")
    assert "in recovery.json). found: how many" in t2.attrs["note"]  # two notes, two sentences
    assert "Unconfirmed top heads, m ioi (gt): L3H3." in to_latex(t2, caption="t2", footer="f", label="tab:t2")
    confirmed = recoveries.assign(unconfirmed=np.nan)  # every shown head confirmed: no such note, no mark
    t2 = TABLES["table2"].build({"evals_main": tsv_round_trip(evals_frame(main, evals, directions={"ioi": True})),
                                 "recoveries_main": confirmed}, options)
    assert "Unconfirmed" not in t2.attrs["note"] and t2.attrs["note"].startswith("found: how many")  # evidence's note
    assert TABLES["table9"].build({"recoveries": confirmed}, options)["heads"].tolist() == ["L2H2, L3H3", "L4H4, L3H3"]


def test_table2_gives_the_heads_it_ablates_with_their_evidence_below_it():
    """Table 2 lists no heads (each row ablates a run's top k): its note gives them, each with its
    value, interval and P(top k) as recovery.json has them; Table 10, which lists them, in a column."""
    from headloc.workflow.results import evals_frame, recoveries_frame, selections

    record = {"model": "m", "task": "ioi", "method": "group_testing", "search": "gt", "n_evals": 25, "r2": None,
              "alpha": None, "warnings": [], "confirmed": None, "ranking": ["L2H2", "L3H3", "L1H1"],
              "top_heads": ["L2H2", "L3H3"], "coef": {"L2H2": -0.5, "L3H3": -0.25, "L1H1": 0.0},
              "interval": {"L2H2": [-0.7, -0.3], "L3H3": [-0.5, 0.01], "L1H1": None},
              "p_top_k": {"L2H2": 1.0, "L3H3": 0.625, "L1H1": None}, "found": ["L2H2"], "no_head_found": ""}
    chosen = selections([record], main={"ioi": "gt"}, capabilities={"ioi": "syntax"}, k=2,
                        universal={"top_n": 1, "min_capabilities": 2, "filter": False},
                        knowledge={"tasks": [], "top_n": 5, "min_tasks": None})
    frame = recoveries_frame([record], chosen, {"ioi": "syntax"})
    for column in ("top_heads", "unconfirmed", "effects"):  # as rule collect_recoveries writes recoveries.tsv
        frame[column] = frame[column].str.join("; " if column == "effects" else ",")
    recoveries = tsv_round_trip(frame)
    evals = [{"model": "m", "task": "ioi", "headset": headset, "value": value}
             for headset, value in (("none", 0.9), ("L2H2", 0.7), ("L2H2+L3H3", 0.5))]
    main = [s for s in chosen if s["kind"] == "task"]
    options = ReportOptions(top_k=2, method="group_testing", capabilities={"ioi": "syntax"})
    t2 = TABLES["table2"].build({"evals_main": tsv_round_trip(evals_frame(main, evals, directions={"ioi": True})),
                                 "recoveries_main": recoveries}, options)
    assert t2["found"].tolist() == ["1 of 2"]
    assert ("The heads ablated, each with its value, its 95 % interval when the documents are resampled and P(in the "
            "top k): m ioi (gt): L2H2 -0.5 [-0.7, -0.3] P 1.00; L3H3 -0.25 [-0.5, 0.01] P 0.62") in t2.attrs["note"]
    t10 = TABLES["table10"].build({"recoveries_main": recoveries}, options)
    assert t10["effects"].tolist() == ["L2H2 -0.5 [-0.7, -0.3] P 1.00; L3H3 -0.25 [-0.5, 0.01] P 0.62"]
    assert "The heads ablated" not in t10.attrs["note"]


@pytest.mark.parametrize("name", ["table2", "table3", "table4", "table9", "table10"])
def test_every_table_that_lists_or_validates_top_heads_shows_an_unconfirmed_one(pevals, name):
    """The tables of a search's top heads (2, 3, 4, 9, 10) read its recoveries and show a head its
    search did not confirm: marked where the table lists heads, else named in the note under it."""
    given = report_frames(pevals)
    options = ReportOptions(top_k=1, gen_tasks=["boolq"], method="cs_stratified",
                            capabilities={"mbpp": "code", "gsm8k": "math"}, knowledge_eval_tasks=["wmdp_bio"])
    for source in ("recoveries", "recoveries_main"):
        given[source] = given[source].assign(unconfirmed="L9H0")
    table = TABLES[name].build(given, options)
    shown = (table["heads"].str.contains("L9H0?", regex=False).any() if "heads" in table
             else "Unconfirmed top heads" in table.attrs.get("note", "") and "L9H0" in table.attrs["note"])
    assert shown, (name, table.attrs.get("note"))
