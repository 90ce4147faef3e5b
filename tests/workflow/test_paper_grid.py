"""The paper grid (config/config.yaml) as Snakemake schedules it (no SLURM, no GPU needed): the jobs
of every paper table and figure, each target running only what it needs, and the SLURM profile.

One `snakemake --dag` of every target gives the whole graph of jobs; a target schedules its own job
and every job it depends on, which is what a dry run of that target alone schedules (checked once
against per-target dry runs; here, against one real dry run of `all` through the SLURM profile).
Each Snakemake runs in a temporary working directory: a checkout's results/ (after `make demo`, say)
changes nothing here.
"""

import re
import shutil
from collections import Counter, defaultdict

import pytest
import yaml

from conftest import REPO, job_counts, snakemake

CONFIG = REPO / "config/config.yaml"
PAPER = yaml.safe_load(CONFIG.read_text())


def scheduled(dot: str, targets) -> dict[str, Counter]:
    """For each target rule, its jobs by rule (its own job and every job it depends on), read from
    the jobs graph that `snakemake --dag dot` prints: one node per job, labelled with its rule and
    wildcards, and an edge from each job to every job that reads its output."""
    rules = {node: label.split("\\n")[0]
             for node, label in re.findall(r'^\s*(\d+)\[label = "([^"]*)"', dot, re.MULTILINE)}
    edges = re.findall(r"^\s*(\d+) -> (\d+)", dot, re.MULTILINE)
    assert rules and len(edges) == dot.count("->"), "every node and edge of the graph is read"
    inputs = defaultdict(set)
    for before, after in edges:
        inputs[after].add(before)
    counts = {}
    for target in targets:
        [node] = [node for node, rule in rules.items() if rule == target]
        needed, todo = {node}, [node]
        while todo:
            for job in inputs[todo.pop()] - needed:
                needed.add(job)
                todo.append(job)
        counts[target] = Counter(rules[job] for job in needed)
    return counts


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
    "run_config": 1, "render_table": 1, "collect_recoveries": 1,
}
# every table of searched heads filters each model's universal heads (universal.detect: damage): one
# job per model measures heads alone on the full data of all 13 tasks, whose documents it reads
UNIVERSAL = {"materialize_dataset": 13, "single_head_damage": 5, "universal_heads": 5}
MAIN, METHODS = {**MAIN, **UNIVERSAL}, {**METHODS, **UNIVERSAL}
EXPECTED = {
    "table1": {"model_geometry": 5, "run_config": 1, "collect_models": 1, "render_table": 1},
    # tables 2 and 3 mark the shown heads their search did not confirm: they read the recoveries too
    **{name: {**MAIN, "collect_evals": 1, "collect_recoveries": 1} for name in ("table2", "table3")},
    **{name: {**MAIN, "collect_evals": 1} for name in ("table5", "table6", "table7", "table8")},
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


@pytest.fixture(scope="module")
def dag(tmp_path_factory) -> dict[str, Counter]:
    """target -> its jobs by rule, for every target of EXPECTED and `all`, from one Snakemake run."""
    work = tmp_path_factory.mktemp("dag")
    targets = [*EXPECTED, "all"]
    dot = snakemake("--dag", "dot", "--forceall", "--configfile", str(CONFIG), "--directory", str(work),
                    *targets, cwd=work).stdout
    return scheduled(dot, targets)


@pytest.fixture(scope="module")
def slurm_dry_run(tmp_path_factory) -> dict[str, int]:
    """The job stats of a real dry run of `all` through the SLURM profile (which must parse)."""
    work = tmp_path_factory.mktemp("slurm")
    result = snakemake("-n", "--profile", str(REPO / "profiles/slurm"), "--forceall", "--configfile", str(CONFIG),
                       "--directory", str(work), "all", cwd=work)
    assert not (work / "results").exists()
    return job_counts(result.stdout)


def test_the_dag_schedules_what_a_dry_run_schedules(dag, slurm_dry_run):
    assert slurm_dry_run == {**dag["all"], "total": sum(dag["all"].values())}


@pytest.mark.parametrize("source", ["dag", "slurm_dry_run"])
def test_paper_grid_dry_run_job_counts(request, source):
    counts = request.getfixturevalue(source)
    counts = counts["all"] if source == "dag" else counts
    # every method's searches (8 tasks x cs_stratified, cs_bernoulli matrices; greedy1s reuses greedy's
    # round 1) and the 36 tuning grid points, 4 of which are main searches already (gsm8k/rhyme M=100,
    # mbpp/swear M=200 at sparsity 0.05), per model; greedy's 8 x 5 rounds x 4 chunks
    assert counts["make_masks"] == 5 * (8 * 2 + 36 - 4) == 240
    assert counts["score_masks"] == 4 * 240 and counts["score_greedy_masks"] == 800
    assert counts["recover_heads"] == 5 * (8 * 4 + 36 - 4)
    assert counts["collect_evals"] == 5 and counts["collect_recoveries"] == 2
    # a heatmap per search of the main plan (tuning points have none): 5 models x 8 tasks x 4 methods
    assert counts["plot_heatmap"] == 5 * 8 * 4 == 160


@pytest.mark.parametrize("target", list(EXPECTED))
def test_each_target_schedules_exactly_its_jobs(dag, target):
    counts = dict(dag[target])
    assert counts.pop(target) == 1
    assert counts == EXPECTED[target]
    if target not in ("table4", "table9", "methods"):
        assert "score_greedy_masks" not in counts


def test_config_on_the_command_line_edits_the_default_config(tmp_path):
    """`--config` alone changes keys of config/config.yaml; it does not replace the file."""
    (tmp_path / "config").mkdir()
    # config/config.yaml as seen from the working directory, for a Snakefile that resolves its default
    # configfile there (the same file as the checkout's)
    shutil.copy(CONFIG, tmp_path / "config/config.yaml")
    result = snakemake("-n", "--forceall", "--directory", str(tmp_path), "table1",
                       "--config", "report={model: llama-3.2-1b}", cwd=tmp_path)
    assert job_counts(result.stdout)["model_geometry"] == 5  # the paper's five models are still there


@pytest.mark.parametrize("capabilities, measured", [(("syntax", "knowledge"), True), (("syntax", "syntax"), False)])
def test_heads_are_measured_alone_only_where_a_head_could_be_universal(tmp_path, capabilities, measured):
    """universal.detect: damage needs tasks of min_capabilities (2) capabilities: two tasks of two
    schedule rule single_head_damage, two of one capability do not (no head could be universal)."""
    config = {"models": {"m": {"source": "smollm2-135m-instruct"}},
              "tasks": {task: {"lm_eval_task": f"headloc_{task}", "capability": capability}
                        for task, capability in zip(("ioi", "capitals"), capabilities)},
              "search": {"methods": ["cs_stratified"], "n_masks": 10}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    counts = job_counts(snakemake("-n", "--forceall", "--configfile", str(tmp_path / "config.yaml"), "--directory",
                                  str(tmp_path), "results/m/universal_heads.json", cwd=tmp_path).stdout)
    assert counts["universal_heads"] == 1 and ("single_head_damage" in counts) == measured
