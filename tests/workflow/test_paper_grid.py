"""Dry runs of the paper grid (config/config.yaml): the jobs it implies, plain and through the SLURM
profile (no SLURM needed), and single-table targets that run only what they need."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from conftest import REPO, snakemake

PAPER = yaml.safe_load((REPO / "config/config.yaml").read_text())


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run."""
    table = output[output.index("Job stats:"):].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


# Jobs each target schedules on the paper grid before the recover_heads checkpoints resolve (the
# validation jobs come after them), worked out by hand from the paper's design rather than read from
# config.yaml: 5 models; 8 searched tasks (gsm8k, arithmetic, mbpp, swear, rhyme, wmdp x 3); 4
# scoring chunks per search; greedy k = 5 rounds; the A.1 grid on 4 tasks x 3 M x 3 sparsities.
MAIN = {  # the main method (cs_stratified) only: 5 x 8 searches
    "materialize_dataset": 8, "subset_dataset": 8, "make_masks": 40, "score_masks": 160,
    "recover_heads": 40, "run_config": 1, "render_table": 1,
}
METHODS = {  # every method: 5 x 8 x (cs_stratified, cs_bernoulli) matrices, 5 x 8 greedy (greedy1s is
    # recovered from greedy's round 1; greedy's rounds wait on each model's universal heads)
    "materialize_dataset": 8, "subset_dataset": 8, "make_masks": 80, "score_masks": 320,
    "make_greedy_masks": 200, "score_greedy_masks": 800, "choose_greedy_head": 200, "recover_heads": 160,
    "universal_heads": 5, "run_config": 1, "render_table": 1, "collect_recoveries": 1,
}
EXPECTED = {
    "table1": {"model_geometry": 5, "run_config": 1, "collect_models": 1, "render_table": 1},
    **{name: {**MAIN, "collect_evals": 1} for name in ("table2", "table3", "table5", "table6", "table7", "table8")},
    "table10": {**MAIN, "collect_recoveries": 1},
    "table4": {**METHODS, "collect_evals": 1},
    "table9": METHODS,
    "tuning": {  # 5 x 36 grid searches, each with its top-k check; one choice per (model, task)
        "materialize_dataset": 4, "subset_dataset": 4, "make_masks": 180, "score_masks": 720,
        "recover_heads": 180, "score_top_heads": 180, "choose_hyperparameters": 20, "run_config": 1,
        "collect_tuning": 1, "render_table": 1},
    **{name: {**{k: v for k, v in MAIN.items() if k != "render_table"}, "collect_evals": 1, "render_figure": 1}
       for name in ("fig1", "fig2", "fig3", "fig4")},
    "methods": {**{k: v for k, v in METHODS.items() if k != "render_table"}, "collect_evals": 1, "render_figure": 1},
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
    counts = job_counts(snakemake("-n", *profile, "--forceall", "all").stdout)
    # every method's searches (8 tasks x cs_stratified, cs_bernoulli matrices; greedy1s reuses greedy's
    # round 1) and the 36 tuning grid points, 4 of which are main searches already (gsm8k/rhyme M=100,
    # mbpp/swear M=200 at sparsity 0.05), per model; greedy's 8 x 5 rounds x 4 chunks
    assert counts["make_masks"] == 5 * (8 * 2 + 36 - 4) == 240
    assert counts["score_masks"] == 4 * 240 and counts["score_greedy_masks"] == 800
    assert counts["recover_heads"] == 5 * (8 * 4 + 36 - 4)
    assert counts["collect_evals"] == 5 and counts["collect_recoveries"] == 2
    # a heatmap per search of the main plan (tuning points have none): 5 models x 8 tasks x 4 methods
    assert counts["plot_heatmap"] == 5 * 8 * 4 == 160


@pytest.fixture(scope="module")
def dry_runs():
    """Every target's dry run, two at a time (each is its own Snakemake process)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = pool.map(lambda target: snakemake("-n", "--forceall", target).stdout, EXPECTED)
        return dict(zip(EXPECTED, outputs))


@pytest.mark.parametrize("target", list(EXPECTED))
def test_each_target_schedules_exactly_its_jobs(dry_runs, target):
    counts = job_counts(dry_runs[target])
    total = counts.pop("total")
    assert total == sum(counts.values()) and counts.pop(target) == 1
    assert counts == EXPECTED[target]
    if target not in ("table4", "table9", "methods"):
        assert "score_greedy_masks" not in counts


def test_config_on_the_command_line_edits_the_default_config():
    """`--config` alone changes keys of config/config.yaml; it does not replace the file."""
    result = snakemake("-n", "--forceall", "table1", "--config", "report={model: llama-3.2-1b}")
    assert job_counts(result.stdout)["model_geometry"] == 5  # the paper's five models are still there
