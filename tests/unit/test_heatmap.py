"""headloc.report.heatmap: a recovery record's per-head effect drawn as layers x heads."""

import numpy as np
import pytest
from matplotlib.colors import TwoSlopeNorm
from PIL import Image

from headloc.report.heatmap import (
    CELL_INCHES,
    value_label,
    figure_size,
    head_grid,
    heatmap_figure,
    panels,
    save_heatmap,
)

N_LAYERS, N_HEADS = 3, 4


def record(method="cs_stratified", **extra):
    """Every head's coef is 10 * layer + head / 10 (distinct, asymmetric in layer and head), minus
    a big drop at L2H1; the top heads are L2H1 then L0H3."""
    coef = {f"L{layer}H{head}": 10 * layer + head / 10 for layer in range(N_LAYERS) for head in range(N_HEADS)}
    coef["L2H1"] = -50.0
    ranking = sorted(coef, key=coef.get)
    return {"model": "tiny", "task": "ioi", "search": f"{method}_n4_s0", "method": method, "n_layers": N_LAYERS,
            "n_heads": N_HEADS, "coef": coef, "ranking": ranking, "top_heads": ["L2H1", "L0H0"], "n_evals": 17,
            **extra}


def test_grid_places_each_head_at_layer_row_head_column():
    grid = head_grid(record())
    assert grid.shape == (N_LAYERS, N_HEADS)
    assert grid[1, 3] == pytest.approx(10.3) and grid[0, 2] == pytest.approx(0.2)
    assert grid[2, 1] == -50.0


def test_drawn_image_holds_coef_at_layer_head():
    rec = record()
    fig = heatmap_figure(rec)
    (image,) = fig.axes[0].images
    array = np.asarray(image.get_array())
    expected = np.array([[rec["coef"][f"L{l}H{h}"] for h in range(N_HEADS)] for l in range(N_LAYERS)])
    np.testing.assert_array_equal(array, expected)
    norm = image.norm
    assert isinstance(norm, TwoSlopeNorm) and norm.vcenter == 0.0
    assert norm.vmin == -50.0 and norm.vmax == 50.0, "symmetric about 0 at the largest |coef|"


def test_top_heads_outlined_and_numbered_at_their_cells():
    fig = heatmap_figure(record())
    ax = fig.axes[0]
    numbers = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert numbers == {(2, 1): "1", (0, 0): "2"}  # (layer, head) -> rank
    corners = {tuple(np.round(p.get_xy(), 1)) for p in ax.patches}
    assert corners == {(0.5, 1.5), (-0.5, -0.5)}  # (head - 0.5, layer - 0.5) of L2H1 and L0H0


def test_top_k_takes_the_ranking():
    ax = heatmap_figure(record(), top_k=3).axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["1", "2", "3"]
    with pytest.raises(ValueError, match="top_k must be an integer >= 0, got -1"):
        heatmap_figure(record(), top_k=-1)


def test_missing_head_is_named():
    rec = record()
    del rec["coef"]["L1H2"]
    with pytest.raises(ValueError, match=r"coef of tiny/ioi/cs_stratified_n4_s0 lacks head L1H2"):
        head_grid(rec)
    with pytest.raises(ValueError, match="lacks head L1H2"):
        heatmap_figure(rec)


def test_head_outside_model_and_bad_record_are_named():
    rec = record()
    rec["coef"]["L3H0"] = 1.0
    with pytest.raises(ValueError, match=r"coef names head L3H0, outside the model's 3 layers x 4 heads"):
        head_grid(rec)
    rec = record()
    rec["coef"]["layer1"] = 1.0
    with pytest.raises(ValueError, match="bad head name 'layer1'"):
        head_grid(rec)
    rec = record()
    del rec["n_heads"]
    with pytest.raises(ValueError, match="lacks n_heads"):
        heatmap_figure(rec)


def test_title_and_labels_name_what_is_shown():
    fig = heatmap_figure(record("greedy"))
    title = fig.get_suptitle()
    for part in ("tiny", "ioi", "greedy", "greedy_n4_s0", "17 evaluations"):
        assert part in title
    ax, bar = fig.axes
    assert ax.get_xlabel() == "head" and ax.get_ylabel() == "layer"
    # wrapped to the figure's height where it would not fit (headloc.report.figures keeps text inside)
    assert " ".join(bar.get_ylabel().split()) == value_label("greedy") == "score change when added (greedy round)"


def test_a_lower_is_better_searchs_label_says_the_sign_is_flipped():
    assert panels(record())[0].label == value_label("cs_stratified")
    (panel,) = panels(record(higher_is_better=False))
    assert panel.label == value_label("cs_stratified") + (" (sign flipped: the metric is lower-is-better, red "
                                                          "still hurts the task)")


def test_top_k_probability_of_each_outlined_head_in_the_title():
    probability = {name: 0.0 for name in record()["coef"]} | {"L2H1": 0.97, "L0H0": 0.415}
    title = heatmap_figure(record(top_k_probability=probability)).get_suptitle()
    assert title.endswith("bootstrap P(in top 2), by rank: 0.97 0.41")
    assert "bootstrap" not in heatmap_figure(record()).get_suptitle()


def test_chg_with_gates_draws_g_minus_and_g_plus_on_a_fixed_scale():
    rec = record("chg")
    g_minus = {name: (i % 7) / 7 for i, name in enumerate(rec["coef"])}
    g_plus = {name: 1 - value for name, value in g_minus.items()}
    rec.update(g_minus=g_minus, g_plus=g_plus, coef={name: -v for name, v in g_minus.items()})
    assert [p.field for p in panels(rec)] == ["g_minus", "g_plus"]
    fig = heatmap_figure(rec)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2
    for image, gates in zip(images, (g_minus, g_plus)):
        expected = [[gates[f"L{l}H{h}"] for h in range(N_HEADS)] for l in range(N_LAYERS)]
        np.testing.assert_allclose(np.asarray(image.get_array()), expected)
        assert (image.norm.vmin, image.norm.vmax) == (0.0, 1.0)
    labels = [ax.get_ylabel() for ax in fig.axes if not ax.images]
    assert labels[0].startswith("G- (facilitation") and labels[1].startswith("G+")


def test_chg_without_gates_draws_coef():
    rec = record("chg")
    assert [p.field for p in panels(rec)] == ["coef"]
    assert len([ax for ax in heatmap_figure(rec).axes if ax.images]) == 1


def test_png_written_at_figure_size(tmp_path):
    path = save_heatmap(record(), tmp_path / "heatmap.png", dpi=100)
    assert path.stat().st_size > 1000
    with Image.open(path) as image:
        assert image.format == "PNG"
        width, height = figure_size(N_LAYERS, N_HEADS)
        assert image.size == (round(width * 100), round(height * 100))


def test_size_grows_with_layers_and_panels():
    small, tall, wide = figure_size(3, 4), figure_size(30, 9), figure_size(30, 9, 2)
    assert tall[1] > small[1] and wide[0] > tall[0] and wide[1] == tall[1]
    # SmolLM2 (30 x 9): at least a quarter inch per layer row, so its tick labels stay apart
    assert (tall[1] - 1.6) / 30 >= 0.25


def test_temporary_name_still_writes_png(tmp_path):
    path = save_heatmap(record(), tmp_path / ".heatmap.png.x1.tmp")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unscored_head_is_gray_not_an_error():
    rec = record("greedy")
    rec["coef"]["L0H1"] = None  # e.g. a universal head greedy left out and never measured
    grid = head_grid(rec)
    assert np.isnan(grid[0, 1]) and np.isfinite(np.delete(grid.ravel(), 1)).all()
    fig = heatmap_figure(rec)
    image = fig.axes[0].images[0]
    assert np.ma.getmaskarray(image.get_array())[0, 1] or np.isnan(image.get_array()[0, 1])
    assert image.cmap.get_bad()[:3] == pytest.approx((0.75, 0.75, 0.75))
    assert image.norm.vmin == -50.0 and image.norm.vmax == 50.0, "the scale ignores the gap"
    assert "gray: no value" in fig.get_suptitle()
    assert "gray" not in heatmap_figure(record("greedy")).get_suptitle()


def outside_the_figure(fig) -> list[str]:
    """The texts of the figure itself (title, footer) whose drawn extent leaves the figure."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    return [text.get_text() for text in fig.texts
            if text.get_window_extent(renderer).x0 < 0 or text.get_window_extent(renderer).x1 > fig.bbox.x1]


@pytest.mark.parametrize("search", [
    "cs_stratified_m100_p0.05_n20_s0_yheadloc_ioi_margin-margin",  # wider than the figure: broken at clauses
    "cs_stratified_m100_p0.05_n20_s0_r1_" + "yheadloc_a_very_long_identification_task-and_metric" * 2,  # one word
])
def test_a_long_title_and_footer_fit_their_figure(search):
    """The demo's searches are named wider than a small model's figure: the title breaks at its
    clauses and spaces, a word wider than the figure shrinks; the footer shrinks."""
    probability = {"L2H1": 1.0, "L0H0": 0.5}
    footer = f"made by rule plot_heatmap with scripts/plot_heatmap.py from results/tiny/ioi/{search}/recovery.json"
    for chg in (False, True):
        rec = record(search=search, top_k_probability=probability)
        rec["coef"]["L0H1"] = None  # the gray clause too
        if chg:
            rec.update(method="chg", g_minus=rec["coef"], g_plus=rec["coef"])
        fig = heatmap_figure(rec, footer=footer)
        assert outside_the_figure(fig) == []
        title = fig.get_suptitle()
        assert title.replace("\n", " ") == (f"tiny / ioi: {rec['method']} search {search}, 17 evaluations; top 2 "
                                            "outlined, numbered by rank; gray: no value bootstrap P(in top 2), by "
                                            "rank: 1.00 0.50")


def test_a_title_of_many_warnings_grows_the_figure_and_leaves_the_cells_their_height():
    """Five long warnings over a model of 2 layers: without room the panel would be squeezed to
    nothing (matplotlib warns and gives up its layout); the figure grows instead, the panel keeps
    at least its cells' height, every text stays inside and nothing warns."""
    import warnings

    warning = "the search stopped short of its top k because no group of heads left to split lowered the score"
    rec = record(warnings=[f"{warning} ({n})" for n in range(5)])
    rec.update(n_layers=2, coef={name: value for name, value in rec["coef"].items() if not name.startswith("L2")},
               top_heads=["L1H1", "L0H0"], ranking=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = heatmap_figure(rec, footer="made by headloc.locate")
        fig.canvas.draw()
    assert fig.get_size_inches()[1] > figure_size(2, N_HEADS)[1]
    assert fig.axes[0].get_window_extent().height >= 2 * CELL_INCHES[1] * fig.dpi
    assert outside_the_figure(fig) == []
    assert heatmap_figure(record()).get_size_inches().tolist() == list(figure_size(N_LAYERS, N_HEADS))


def test_a_title_that_fits_is_left_as_it_is():
    fig = heatmap_figure(record(top_heads=[]))
    assert fig.get_suptitle() == "tiny / ioi: cs_stratified\nsearch cs_stratified_n4_s0, 17 evaluations"
    assert fig.texts[0].get_fontsize() == 9 and outside_the_figure(fig) == []


def test_a_search_capped_before_confirming_its_top_k_says_so_in_the_title(tmp_path):
    """recovery.json as checkpoint recover_heads writes it for a group testing search capped at 20
    evaluations on a simulated 128-head model: the title names the outlined heads it did not
    confirm (by rank) and carries its warning; a complete search's title has neither."""
    import logging

    from headloc.heads import HeadGeometry
    from headloc.methods import get, steps
    from headloc.methods.kinds import sequential
    from headloc.search.simulate import make_world

    world, geometry, log = make_world(seed=4, n_heads=128, tau=0.02), HeadGeometry(8, 16), logging.getLogger("t")

    def recovery(cap):
        params = sequential.SequentialParams("group_testing", cap, 4, 5, 0.05, {})
        sequential.sequential(params, geometry, world.score, tmp_path / f"{cap}.npz", tmp_path / f"{cap}.json", log)
        found = steps.recover(steps.RecoverParams("group_testing", 0.001, 4, 5),
                              steps.RecoverInputs(result=str(tmp_path / f"{cap}.json")), geometry, log)
        return {"model": "sim", "task": "t", "search": f"gt{cap}", **found}

    capped = recovery(20)
    title = " ".join(heatmap_figure(capped).get_suptitle().split())  # the lines as fitted, joined again
    ranks = [str(rank) for rank, head in enumerate(capped["top_heads"], 1) if head not in capped["confirmed"]]
    assert ranks and f"not confirmed alone (a group's value), by rank: {', '.join(ranks)}" in title
    (warning,) = capped["warnings"]
    assert f"warning: {warning}" in title and "cap of 20 evaluations" in warning
    complete = heatmap_figure(recovery(100)).get_suptitle()
    assert "not confirmed" not in complete and "warning" not in complete


def test_the_title_says_which_outlined_heads_stand_above_the_noise_and_when_none_does():
    """The record's evidence (headloc.search.evidence) in words: the ranks of the outlined heads
    found above noise, or "no head found above noise" with the record's reason."""
    ranking = record()["ranking"]  # outlined: its first two, L2H1 then L0H0
    found = heatmap_figure(record(found=[ranking[1]], no_head_found="")).get_suptitle()
    assert "found above noise, by rank: 2;" in found
    none = heatmap_figure(record(found=[], no_head_found="every interval holds 0")).get_suptitle()
    assert none.replace("\n", " ").endswith("no head found above noise: every interval holds 0")
    assert "above noise" not in heatmap_figure(record()).get_suptitle()  # a record without evidence
