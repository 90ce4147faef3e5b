"""Every figure the workflow draws, at its own size, shows all of its text: no title, caption,
label, tick label, legend or footer leaves the figure, and the figure's own lines (caption, footer)
do not run over a panel's labels. Each figure is built by the function its rule calls
(scripts/render_figure.py: ``FIGURES[name].build``; scripts/plot_heatmap.py: ``heatmap_figure``),
from small synthetic inputs shaped like the demo's and the paper grid's."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from headloc.report import FIGURES, ReportOptions
from headloc.report.heatmap import heatmap_figure
from unit.test_report import CAPS, MODELS_FRAME, OPTIONS, TUNING_FRAME, paper_evals

PX = 1.0  # rounding slack, in pixels

# the demo (config/demo.yaml): three tasks scored in percentage points, guided greedy's long search ids
DEMO_TASKS = ("ioi", "capitals", "induction")
DEMO_SEARCH = "guided_greedy_k5_l10_a10_c0_n20_s0_yheadloc_{task}_loglik-loglik"
DEMO_OPTIONS = ReportOptions(
    top_k=5, method="guided_greedy", capabilities={task: task for task in DEMO_TASKS},
    figure_model="smollm2-135m", figure_capability="ioi",
    units={task: ["points", "acc"] for task in DEMO_TASKS}, directions={task: True for task in DEMO_TASKS})
# the paper grid's style: long task names, metrics in three units, lower-is-better tasks flipped
PAPER_OPTIONS = ReportOptions(**{
    **{f: getattr(OPTIONS, f) for f in ("top_k", "gen_tasks", "method", "capabilities", "knowledge_tasks",
                                        "knowledge_eval_tasks")},
    "units": {**{task: ["points", "acc_norm,none"] for task in CAPS}, "wikitext": ["own", "word_perplexity,none"],
              "swear_relative": ["relative", "profane_words"]},
    "directions": {**{task: True for task in CAPS}, "wikitext": False, "swear_relative": False}})


def footer(name: str) -> str:
    return f"made by rule render_figure ({name}) with scripts/render_figure.py"


def demo_evals(methods=("guided_greedy",)) -> pd.DataFrame:
    """Each demo task searched by each method: k = 0..5 heads ablated, every task evaluated."""
    rows = []
    for m, method in enumerate(methods):
        for task in DEMO_TASKS:
            search = DEMO_SEARCH.format(task=task).replace("guided_greedy", method, 1)
            for k in range(6):
                for eval_task in DEMO_TASKS:
                    score = 80.0 - (15 * k if eval_task == task else 2 * k) - m
                    rows.append(dict(model="smollm2-135m", kind="task", task=task, capability=task,
                                     method=method, search=search, k=k, headset="none" if k == 0 else f"h{k}",
                                     eval_task=eval_task, eval_capability=eval_task, score=score,
                                     higher_is_better=True))
    return pd.DataFrame(rows)


def recoveries_of(evals: pd.DataFrame, n_evals: dict[str, int]) -> pd.DataFrame:
    runs = evals[["model", "task", "method", "search"]].drop_duplicates()
    return runs.assign(top_heads="L23H3,L20H0,L19H2,L24H4,L18H0", n_evals=[n_evals[m] for m in runs["method"]])


def paper_frames() -> dict[str, pd.DataFrame]:
    full = paper_evals()
    recoveries = pd.DataFrame({
        "model": "m1", "task": ["gsm8k", "arith", "wmdp_bio"], "method": "cs_stratified", "search": "cs",
        "top_heads": ["L9H0,L9H1", "L9H0", "L9H0"], "n_evals": 100})
    return {"evals_main": full, "evals_methods": full, "evals_knowledge": full, "evals_universal": full,
            "recoveries": recoveries, "recoveries_main": recoveries, "models": MODELS_FRAME, "tuning": TUNING_FRAME}


def demo_frames() -> dict[str, pd.DataFrame]:
    evals = demo_evals(("guided_greedy", "cs_stratified", "greedy"))
    return {"evals_main": demo_evals(), "evals_methods": evals,
            "recoveries": recoveries_of(evals, {"guided_greedy": 83, "cs_stratified": 100, "greedy": 1341})}


def heatmap_record(n_layers=30, n_heads=9, method="guided_greedy", **extra) -> dict:
    coef = {f"L{layer}H{head}": (layer - head) / 100 for layer in range(n_layers) for head in range(n_heads)}
    search = DEMO_SEARCH.format(task="ioi").replace("guided_greedy", method, 1)
    return {"model": "smollm2-135m", "task": "ioi", "search": search, "method": method, "n_layers": n_layers,
            "n_heads": n_heads, "coef": coef, "ranking": sorted(coef, key=coef.get), "n_evals": 83,
            "top_heads": ["L0H8", "L1H8", "L2H8", "L3H8", "L4H8"], **extra}


def heatmap(record: dict):
    path = f"results/smollm2-135m/ioi/{record['search']}/recovery.json"
    return heatmap_figure(record, footer=f"made by rule plot_heatmap with scripts/plot_heatmap.py from {path}")


FIGURE_CASES = {
    **{f"demo-{name}": (name, demo_frames, DEMO_OPTIONS) for name in ("fig1", "fig2", "methods")},
    **{f"paper-{name}": (name, paper_frames, PAPER_OPTIONS) for name in FIGURES},
    # legitimately empty: a knowledge task configured that the model never searched
    "empty-fig4": ("fig4", demo_frames, ReportOptions(**{**DEMO_OPTIONS.__dict__, "knowledge_tasks": (
        "wmdp_bio", "wmdp_chem", "wmdp_cyber")})),
}
HEATMAP_CASES = {
    "demo": lambda: heatmap_record(),
    "tiny-model": lambda: heatmap_record(n_layers=2, n_heads=4, top_heads=["L1H0"], top_k_probability={"L1H0": 0.5}),
    "chg-gates": lambda: heatmap_record(method="chg", g_minus={}, g_plus={}) | {
        "g_minus": {f"L{l}H{h}": 0.5 for l in range(30) for h in range(9)},
        "g_plus": {f"L{l}H{h}": 0.5 for l in range(30) for h in range(9)}},
    "capped-group-testing": lambda: heatmap_record(
        method="group_testing", confirmed=["L0H8"],
        warnings=["stopped at its cap of 20 evaluations before confirming 4 of its top 5 heads"]),
}


def drawn_texts(fig) -> tuple[object, list[Text]]:
    """The renderer and every text the figure draws: its own (caption, footer), each panel's title,
    axis labels, tick labels inside the axis' view, in-panel notes and legends, the figure legends."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)  # runs the layout engine, as savefig does
    texts = list(fig.texts)
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = min(low, high), max(low, high)
            texts += [tick.label1 for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                      if low <= tick.get_loc() <= high and tick.label1.get_visible()]
        if ax.get_legend():
            texts += [*ax.get_legend().get_texts(), ax.get_legend().get_title()]
    for legend in fig.legends:
        texts += [*legend.get_texts(), legend.get_title()]
    return renderer, [t for t in texts if t.get_visible() and t.get_text().strip()]


def text_problems(fig) -> list[str]:
    """Each text that leaves the figure, and each of the figure's own lines that overlaps a panel
    (its title, labels, tick labels) or a figure legend; empty when the figure shows all its text."""
    renderer, texts = drawn_texts(fig)
    box = fig.bbox
    problems = []
    for text in texts:
        extent = text.get_window_extent(renderer)
        if extent.x0 < box.x0 - PX or extent.x1 > box.x1 + PX or extent.y0 < box.y0 - PX or extent.y1 > box.y1 + PX:
            problems.append(f"outside the figure {tuple(box.bounds)}: {text.get_text()!r} at {tuple(extent.bounds)}")
    panels = [ax.get_tightbbox(renderer) for ax in fig.axes] + [legend.get_window_extent(renderer)
                                                                 for legend in fig.legends]
    for text in fig.texts:
        extent = text.get_window_extent(renderer)
        for panel in panels:
            overlap = Bbox.intersection(extent, panel)
            if overlap is not None and overlap.width > PX and overlap.height > PX:
                problems.append(f"over a panel {tuple(panel.bounds)}: {text.get_text()!r} at {tuple(extent.bounds)}")
    return problems


@pytest.mark.parametrize("case", list(FIGURE_CASES))
def test_every_figure_shows_all_its_text(case):
    name, frames, options = FIGURE_CASES[case]
    fig = FIGURES[name].build(frames(), options, footer=footer(name))
    assert text_problems(fig) == []


@pytest.mark.parametrize("case", list(HEATMAP_CASES))
def test_every_heatmap_shows_all_its_text(case):
    assert text_problems(heatmap(HEATMAP_CASES[case]())) == []


def test_the_checks_see_a_clipped_caption_and_one_over_a_label():
    """The checks themselves: a caption wider than the figure, and a footer over the x label."""
    fig = FIGURES["fig1"].build(demo_frames(), DEMO_OPTIONS, footer=None)
    fig.suptitle("x" * 400)
    assert any("outside the figure" in problem for problem in text_problems(fig))
    fig = FIGURES["fig1"].build(demo_frames(), DEMO_OPTIONS, footer=None)
    fig.text(0.5, 0.02, "a footer where the tick labels are", ha="center", va="bottom")
    assert any("over a panel" in problem for problem in text_problems(fig))


def test_figure2_caption_is_the_run_note_in_full():
    """Wrapped to fit, the caption still says every task's unit and direction, word for word."""
    fig = FIGURES["fig2"].build(paper_frames(), PAPER_OPTIONS, footer=footer("fig2"))
    assert " ".join(fig.get_suptitle().split()) == PAPER_OPTIONS.delta_note()
    assert "\n" in fig.get_suptitle()  # too wide for one 3.4 in panel on one line


def test_a_word_wider_than_the_figure_is_drawn_smaller_until_it_fits():
    """Where wrapping cannot help (one word: a long search id), the text shrinks until its drawn
    width is at most the width asked for; text that fits keeps its size."""
    import matplotlib.pyplot as plt

    from headloc.report.text_fit import shrink_to_fit

    fig = plt.figure(figsize=(3, 2), dpi=100)
    renderer = fig.canvas.get_renderer()
    try:
        wide = fig.text(0.5, 0.5, "x" * 120, fontsize=12, ha="center")
        assert wide.get_window_extent(renderer).width > 300  # wider than the 300-pixel figure
        shrink_to_fit(wide, 270)
        assert wide.get_window_extent(renderer).width <= 270 + PX and wide.get_fontsize() < 12
        short = fig.text(0.5, 0.2, "fits", fontsize=12)
        shrink_to_fit(short, 270)
        assert short.get_fontsize() == 12
    finally:
        plt.close(fig)
