"""The random baseline (search method ``random``): k heads drawn at random per seed, no evaluation."""

import logging

from scipy.stats import chisquare

from conftest import REPO, accuracy_demo
from headloc import methods
from headloc.methods.steps import RecoverInputs, RecoverParams
from headloc.workflow.config import check_workflow_config
from headloc.workflow.plan import Plan

NAMES = [f"L{layer}H{head}" for layer in range(4) for head in range(6)]


def draw(seed):
    params = RecoverParams(method="random", alpha="cv", seed=seed, top_k=3)
    return methods.get("random").recover(RecoverInputs(), NAMES, params, logging.getLogger())


def test_a_draw_is_a_seeded_permutation_and_measures_nothing():
    first = draw(0)
    assert sorted(first["ranking"]) == sorted(NAMES)
    assert first["ranking"] == draw(0)["ranking"] != draw(1)["ranking"]
    assert first["n_evals"] == 0 and set(first["coef"].values()) == {None}


def test_every_head_is_equally_likely_in_the_top_k():
    k, seeds = 3, 2000
    counts = dict.fromkeys(NAMES, 0)
    for seed in range(seeds):
        for head in draw(seed)["ranking"][:k]:
            counts[head] += 1
    # each head lands in the top k with probability k / N: a chi-square test of that, not a threshold of ours
    assert chisquare(list(counts.values())).pvalue > 0.001
    assert sum(counts.values()) == k * seeds


def test_the_workflow_plans_one_draw_per_repeat_and_reads_only_the_model():
    config = accuracy_demo()
    config["search"].update(methods=["cs_stratified", "random"], repeats=3)
    check_workflow_config(config, REPO / "config/schema.yaml")  # the schema's enum is the registry's
    plan = Plan(config)
    draws = [s for s in plan.searches["ioi"].values() if s.method == "random"]
    assert [(s.id, s.seed) for s in draws] == [("random_s0", 0), ("random_s0_r1", 1), ("random_s0_r2", 2)]
    assert plan.recovery_inputs("m", "ioi", "random_s0_r1", ["results/models/m"]) == {"model": ["results/models/m"]}
