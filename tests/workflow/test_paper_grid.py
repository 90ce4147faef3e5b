"""Dry runs of the paper grid (config/config.yaml): the jobs it implies, plain and through the SLURM
profile (no SLURM needed), and single-table targets that run only what they need."""

import re

import pytest
import yaml

from conftest import REPO, snakemake

PAPER = yaml.safe_load((REPO / "config/config.yaml").read_text())


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run."""
    table = output[output.index("Job stats:"):].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def expected_counts() -> dict[str, int]:
    """What the grid implies before the first checkpoint (recover_heads) resolves, from the config."""
    models = len(PAPER["models"])
    search, top_k, chunks = PAPER["search"], PAPER["validation"]["top_k"], PAPER["search"]["chunks"]
    localized = [t for t, spec in PAPER["tasks"].items() if spec.get("localize", True)]
    mask_searches = set()  # (task, method, M, sparsity): one make_masks each
    greedy = 0
    for task in localized:
        settings = {**search, **PAPER["tasks"][task].get("search", {})}
        for method in settings["methods"]:
            if method == "greedy":
                greedy += 1
            else:
                key = (task, method) if method == "greedy1s" else (task, method, settings["n_masks"],
                                                                    settings["sparsity"])
                mask_searches.add(key)
    tuning = PAPER["tuning"]
    grid = {(task, tuning["method"], m, p) for task in tuning["tasks"] for m in tuning["n_masks"]
            for p in tuning["sparsity"]}
    n_grid = len(tuning["tasks"]) * len(tuning["n_masks"]) * len(tuning["sparsity"])
    mask_searches |= grid
    return {
        "model_geometry": models,
        "materialize_dataset": len(localized),  # the searched tasks; the rest after the checkpoint
        "subset_dataset": len(localized),
        "make_masks": models * len(mask_searches),
        "score_masks": models * len(mask_searches) * chunks,
        "make_greedy_masks": models * greedy * top_k,
        "score_greedy_masks": models * greedy * top_k * chunks,
        "choose_greedy_head": models * greedy * top_k,
        "recover_heads": models * (len(mask_searches) + greedy),
        "score_top_heads": models * n_grid,
        "choose_hyperparameters": models * len(tuning["tasks"]),
    }


def test_the_paper_grid_config_is_the_paper():
    assert sorted(PAPER["models"]) == ["llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b", "qwen-2.5-3b",
                                       "qwen-2.5-7b"]
    assert {spec["source"] for spec in PAPER["models"].values()} == {
        "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-3B-Instruct"}
    assert {spec["dtype"] for spec in PAPER["models"].values()} == {"bfloat16"}
    assert set(PAPER["tasks"]) == {"gsm8k", "arithmetic", "mbpp", "humaneval", "swear", "rhyme", "wmdp_bio",
                                   "wmdp_chem", "wmdp_cyber", "hellaswag", "boolq", "arc_challenge", "mmlu"}
    assert PAPER["validation"]["gen_tasks"] == ["hellaswag", "boolq", "arc_challenge", "mmlu"]
    assert set(PAPER["search"]["methods"]) == {"cs_stratified", "cs_bernoulli", "greedy1s", "greedy"}


@pytest.mark.parametrize("profile", [[], ["--profile", "profiles/slurm"]], ids=["local", "slurm"])
def test_paper_grid_dry_run_job_counts(profile):
    result = snakemake("-n", *profile, "--forceall", "all")
    counts = job_counts(result.stdout)
    expected = expected_counts()
    assert {rule: counts.get(rule) for rule in expected} == expected
    # the paper's numbers for this config: 5 models x (8 tasks x 3 mask searches + 36 grid points - 4
    # shared with the main searches) = 280 measurement matrices
    assert counts["make_masks"] == 280 and counts["score_greedy_masks"] == 800


@pytest.mark.parametrize("table, wanted, unwanted", [
    ("table1", {"model_geometry", "collect_models", "render_table"}, {"score_masks", "validate_headset"}),
    ("table10", {"score_masks", "recover_heads", "collect_recoveries"}, {"score_top_heads"}),
    ("tuning", {"score_top_heads", "choose_hyperparameters", "collect_tuning"}, {"score_greedy_masks"}),
])
def test_one_table_runs_only_what_it_needs(table, wanted, unwanted):
    counts = job_counts(snakemake("-n", "--forceall", table).stdout)
    assert wanted <= set(counts) and not unwanted & set(counts)
