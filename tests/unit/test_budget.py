"""headloc.search.budget: the masks the planted-head family needed, and the note a config gets when
its search spends fewer."""

import math

import pytest

from conftest import REPO, accuracy_demo
from headloc.heads import HeadGeometry
from headloc.search.budget import PER_K_LOG_N, suggested_masks
from headloc.workflow.config import check_config
from headloc.workflow.schema import validate_config

# (heads, k, masks at which cs_stratified or cs_adaptive held 95 % of a certified task's role heads,
# mean over 3 placements x 3 seeds; the larger of the two designs' budgets): docs/ground-truth.md,
# "Budget advice" (benchmarks/ground_truth.py, log-probability score)
MEASURED = [(32, 2, 50), (32, 4, 50), (32, 5, 50), (270, 2, 50), (270, 4, 100), (270, 5, 100),
            (1024, 2, 100), (1024, 4, 100), (1024, 5, 100)]


def test_the_advice_is_c_k_log_n_over_k():
    assert suggested_masks(270, 5) == math.ceil(PER_K_LOG_N * 5 * math.log(54))
    assert suggested_masks(1024, 1) == math.ceil(PER_K_LOG_N * math.log(1024))
    assert suggested_masks(8, 100) == suggested_masks(8, 4)  # k clipped to N / 2
    with pytest.raises(ValueError, match="n_heads must be at least 2, got 1"):
        suggested_masks(1, 1)


@pytest.mark.parametrize("n_heads,k,needed", MEASURED)
def test_no_planted_task_needed_more_than_the_advice(n_heads, k, needed):
    assert needed <= suggested_masks(n_heads, k)


def demo(main="cs_stratified", **search):
    config = accuracy_demo()
    config["search"].update(search)
    config["validation"]["method"] = main
    validate_config(config, REPO / "config/schema.yaml")
    return config


def test_a_search_below_the_advice_gets_a_note(capsys):
    advised = suggested_masks(270, 5)  # SmolLM2: 30 layers x 9 heads; the demo's top_k is 5
    check_config(demo(n_masks=advised - 1), {"smollm2-135m": HeadGeometry(30, 9)})
    err = capsys.readouterr().err
    assert (f"note: config search.n_masks: {advised - 1} masks for ioi, capitals, induction on model "
            f"smollm2-135m (270 heads): on the planted-head models about {advised} masks put 95 % of 5 heads "
            f"(validation.top_k) among 270 in the top 5; fewer can miss some") in err
    check_config(demo(n_masks=advised), {"smollm2-135m": HeadGeometry(30, 9)})
    assert "search.n_masks" not in capsys.readouterr().err
    check_config(demo("greedy1s", n_masks=advised - 1, methods=["greedy1s"]), {"smollm2-135m": HeadGeometry(30, 9)})
    assert "search.n_masks" not in capsys.readouterr().err  # no mask design spends n_masks
    check_config(demo("group_testing", n_masks=advised - 1, methods=["group_testing"]), {"smollm2-135m": HeadGeometry(30, 9)})
    assert "search.n_masks" not in capsys.readouterr().err  # a sequential search's cap, not a design
    check_config(demo(n_masks=advised - 1), {"smollm2-135m": None})  # geometry unknown offline: no advice
    assert "search.n_masks" not in capsys.readouterr().err
