"""The tables a person reads name a search by a short label (its method and what it sets apart from
the method's defaults), the CSV by its full id; the demo's Table 2 fits 100 columns."""

import io

import pandas as pd
import pytest

from headloc.report import TABLES, ReportOptions, to_csv, to_html, to_latex, to_markdown
from headloc.report.labels import search_label, search_labels
from headloc.workflow.plan import Plan
from unit.test_plan import validated

DEMO = Plan(validated("config/demo.yaml"))
METHODS = Plan(validated("config/methods.yaml"))


def test_a_method_with_its_defaults_reads_as_its_name():
    assert [search_label(DEMO.main_search(task)) for task in DEMO.localized] == ["screened_greedy"] * 3
    assert DEMO.main_search("ioi") == "screened_greedy_k5_l10_a10_g3_p4_h2_f3_d3_n20_s0_yheadloc_ioi_margin-margin"


def test_every_search_of_make_methods_has_a_label_of_its_own():
    """config/methods.yaml: eleven methods, three budgets, two repeats; per task, no two labels alike,
    each a few words, and each says its method, budget and repeat."""
    for task in METHODS.localized:
        searches = METHODS.searches[task]
        labels = search_labels(searches)
        assert len(set(labels)) == len(labels), labels
        for label, search in zip(labels, searches.values()):
            assert label.split()[0] == search.method and len(label) <= 40, (label, search.id)
            assert (f" m{search.n_masks}" in label) == methods_budgeted(search.method), (label, search.id)
            assert label.endswith(f" r{search.repeat}") == bool(search.repeat), (label, search.id)
        assert "cs_stratified m25 r1" in labels and "greedy xu" in labels and "random r1" in labels  # xu: universal heads left out


def methods_budgeted(method):
    from headloc.methods import get

    return get(method).budgeted


@pytest.mark.parametrize("search, label", [
    ("group_testing_m100_k5_g16_per1_x2_n20_s0", "group_testing m100 g16"),  # g16 over the default gauto
    ("conditional_group_testing_m60_k3_gauto_x2_b1_screen_n20_s0", "conditional_group_testing m60 k3 screen"),
    ("greedy_k5_xu_n100_s0", "greedy xu"),  # greedy leaving the universal heads out
    ("thompson_m50_damage_n20_s0_r2", "thompson m50 damage r2"),
    ("chg_x4_l0.1_t500_n20_s0", "chg"),
    ("not_a_method_m5", "not_a_method_m5"),
])
def test_a_setting_apart_from_the_default_is_shown(search, label):
    assert search_label(search) == label


def test_two_searches_of_one_task_never_read_alike():
    """A nested budget of 25 and a design of 25 (both ``m25``) keep their full ids; the same
    method on two tasks shares its label, the task column tells them apart."""
    alike = ["cs_stratified_m25of100_p0.05_n20_s0", "cs_stratified_m25_p0.05_n20_s0"]
    assert search_labels(alike) == alike
    assert search_labels(["greedy_k5_n20_s0", "greedy_k5_n20_s0_yt-acc"]) == ["greedy", "greedy"]


def demo_table2():
    """The demo's Table 2 as rule render_table builds it: one screened greedy search per task."""
    rows = []
    for task in DEMO.localized:
        for k in (0, 5):
            for eval_task in DEMO.tasks:
                rows.append(dict(model="smollm2-135m", kind="task", task=task, capability=task, method="screened_greedy",
                                 search=DEMO.main_search(task), k=k, headset="none" if k == 0 else "h",
                                 eval_task=eval_task, score=100.0 - 88.0 * (k > 0) * (eval_task == task),
                                 higher_is_better=True))
    recoveries = pd.DataFrame({"model": "smollm2-135m", "task": DEMO.localized, "method": "screened_greedy",
                               "search": [DEMO.main_search(task) for task in DEMO.localized],
                               "top_heads": "L23H3,L20H0,L19H2,L24H4,L18H0", "n_evals": 83,
                               "unconfirmed": ["L18H0", "", ""]})
    options = ReportOptions(**DEMO.report_options({task: True for task in DEMO.tasks}))
    spec = TABLES["table2"]
    return spec.build({"evals_main": pd.DataFrame(rows), "recoveries_main": recoveries}, options), spec.title(options)


def test_the_demo_table2_fits_100_columns_and_its_csv_keeps_the_full_ids():
    table, title = demo_table2()
    footer = (f"made by rule render_table (table2) with scripts/render_table.py from results/runs/{DEMO.digest}/"
              f"evals_main.tsv, results/runs/{DEMO.digest}/recoveries_main.tsv")
    md = to_markdown(table, title=title, footer=footer)
    assert max(len(line) for line in md.splitlines()) <= 100, md
    assert "| ioi | smollm2-135m | ioi | screened_greedy | 5 | -88.0 | 0.0 |" in md
    assert "Unconfirmed top heads, smollm2-135m ioi (screened_greedy): L18H0." in " ".join(md.split())
    # the prose is the same words, only broken into lines
    assert f"**{title}**" in " ".join(md.split())
    assert footer in " ".join(md.split())
    csv = pd.read_csv(io.StringIO(to_csv(table)))
    assert csv["search"].tolist() == [DEMO.main_search(task) for task in DEMO.localized]
    for text in (to_latex(table, caption=title, footer=footer), to_html(table, title=title, footer=footer)):
        assert "screened_greedy_k5" not in text and "yheadloc" not in text


def test_a_markdown_line_is_never_read_as_a_list_or_heading():
    """A break that would start a line with "- " (a list), "#" or "1." keeps that word on the line before."""
    note = "x" * 95 + " - y # z"
    md = to_markdown(pd.DataFrame({"a": [1]}), title="t", footer="f " + "w" * 97 + " 1. g").splitlines()
    assert all(not line.startswith(("- ", "# ", "1. ")) for line in md)
    table = pd.DataFrame({"a": [1]})
    table.attrs["note"] = note
    assert all(not line.startswith(("- ", "# ")) for line in to_markdown(table, title="t", footer="f").splitlines())
