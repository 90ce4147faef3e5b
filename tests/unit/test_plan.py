"""The experiment plan (headloc.workflow.plan) and the task/document checks (headloc.data.documents)."""

import copy
import inspect
import json

import pytest
import yaml

from conftest import REPO, accuracy_demo
from headloc.search.chg import chg
from headloc.data import TASKS_DIR
from headloc.workflow.config import check_config
from headloc.workflow.schema import validate_config
from headloc.data.datasets import build_docs, read_jsonl_numbered
from headloc.data.documents import check_documents, load_task_yaml, required_fields, task_files, task_yaml
from headloc.report import target_table
from headloc.collected import COLLECTIONS
from headloc.workflow.plan import Plan, choose_tuning_point, config_digest
from headloc.workflow.plan_tables import in_collection


def validated(path_or_config):
    config = (yaml.safe_load((REPO / path_or_config).read_text()) if isinstance(path_or_config, str)
              else copy.deepcopy(path_or_config))
    validate_config(config, REPO / "config/schema.yaml")
    return config


@pytest.fixture(scope="module")
def paper():
    return Plan(validated("config/config.yaml"))


def test_paper_grid_searches(paper):
    # 8 searched tasks (humaneval and the four general benchmarks are evaluated only)
    assert sorted(paper.localized) == ["arithmetic", "gsm8k", "mbpp", "rhyme", "swear", "wmdp_bio", "wmdp_chem",
                                       "wmdp_cyber"]
    assert list(paper.searches["gsm8k"]) == ["cs_stratified_m100_p0.05_n100_s0", "cs_bernoulli_m100_p0.05_n100_s0",
                                             "greedy1s_n100_s0", "greedy_k5_xu_n100_s0"]
    assert paper.main_search("swear") == "cs_stratified_m200_p0.05_n12_s0"  # its own M and subset size
    assert paper.search("gsm8k", "cs_stratified_m400_p0.1_n100_s0").grid_point() == {
        "method": "cs_stratified", "n_masks": 400, "sparsity": 0.1}  # a tuning grid point
    with pytest.raises(KeyError, match="no search 'nope' on task 'gsm8k'"):
        paper.search("gsm8k", "nope")


def test_gradient_methods_search_ids():
    config = validated(accuracy_demo())
    config["search"]["methods"] = ["cs_stratified", "attribution", "chg"]
    config["tasks"]["capitals"]["id_docs"] = 12
    plan = Plan(config)
    # the schema's chg defaults are headloc.search.chg's: 4 seed rows, lambda 0.1, 500 updates per fit
    assert config["chg"] == {"seeds": 4, "lam": 0.1, "steps": 500}
    defaults = {k: v.default for k, v in inspect.signature(chg).parameters.items()}
    assert (len(defaults["seeds"]), defaults["lam"], defaults["init_steps"], defaults["fit_steps"]) == (4, 0.1, 500, 500)
    assert Plan({**config, "chg": {}}).method_options("chg").as_config() == config["chg"]
    assert plan.method_options("cs_stratified") is None
    assert list(plan.searches["ioi"]) == ["cs_stratified_m100_p0.05_n20_s0", "attribution_n20_s0",
                                          "chg_x4_l0.1_t500_n20_s0"]
    assert list(plan.searches["capitals"])[1:] == ["attribution_n12_s0", "chg_x4_l0.1_t500_n12_s0"]
    assert plan.search("ioi", "chg_x4_l0.1_t500_n20_s0").method == "chg"
    assert plan.search("ioi", "attribution_n20_s0").method == "attribution"
    assert len(plan.searches_of("recoveries")) == 3 * 3
    assert {plan.search(t, s).method for t, s in plan.searches_of("recoveries_main")} == {"cs_stratified"}

    # every chg hyperparameter of the config, and the subset seed, moves the chg search (not attribution's)
    for key, value, search_id in (("seeds", 2, "chg_x2_l0.1_t500_n20_s0"), ("lam", 0.05, "chg_x4_l0.05_t500_n20_s0"),
                                  ("steps", 30, "chg_x4_l0.1_t30_n20_s0")):
        changed = copy.deepcopy(config)
        changed["chg"][key] = value
        assert list(Plan(changed).searches["ioi"])[1:] == ["attribution_n20_s0", search_id]
    changed = copy.deepcopy(config)
    changed["search"]["seed"] = 3
    assert list(Plan(changed).searches["ioi"])[1:] == ["attribution_n20_s3", "chg_x4_l0.1_t500_n20_s3"]

    # a gradient method can be the main method; an unknown one is refused by the schema and the plan
    config["validation"]["method"] = "attribution"
    assert Plan(config).main_search("ioi") == "attribution_n20_s0"
    bad = copy.deepcopy(config)
    bad["search"]["methods"] = ["cs_stratified", "gradients"]
    with pytest.raises(Exception, match="gradients"):
        validate_config(bad, REPO / "config/schema.yaml")
    with pytest.raises(ValueError, match="methods: unknown search method 'gradients'; known: .*attribution, chg"):
        Plan(bad)


def test_each_collection_needs_only_its_searches(paper):
    main = paper.searches_of("evals_main")
    assert len(main) == 8 and {paper.search(t, s).method for t, s in main} == {"cs_stratified"}
    assert paper.searches_of("recoveries_main") == main
    assert paper.searches_of("evals_universal") == main and paper.searches_of("evals_knowledge") == main
    every = paper.searches_of("evals_methods")
    assert len(every) == 32 and set(main) <= set(every)
    assert paper.searches_of("models") == [] and paper.searches_of("tuning") == []


def test_head_sets_of_a_collection():
    config = validated(accuracy_demo())
    config["search"]["methods"] = ["cs_stratified", "greedy1s"]
    config["validation"]["top_k"] = 2
    config["validation"]["headsets"] = ["L9H9+L0H1"]
    config["universal"].update(detect="ranking", top_n=1, min_capabilities=2)
    plan = Plan(config)
    cs, one = "cs_stratified_m100_p0.05_n20_s0", "greedy1s_n20_s0"
    rankings = {("ioi", cs): ["L1H5", "L2H0", "L3H3"], ("capitals", cs): ["L1H5", "L4H4", "L5H5"],
                ("induction", cs): ["L6H6", "L1H5", "L7H7"], ("ioi", one): ["L8H8", "L1H5", "L0H0"]}
    main = {key: r for key, r in rankings.items() if key[1] == cs}
    # L1H5 tops ioi and capitals (two capabilities): universal, filtered out of every top-k
    assert plan.headsets("evals_main", main) == ["L2H0", "L2H0+L3H3", "L4H4", "L4H4+L5H5", "L6H6",
                                                 "L6H6+L7H7", "none"]
    # other methods: top k only (greedy1s filtered: L8H8, L0H0); every search's unfiltered top k too
    assert plan.headsets("evals_methods", rankings) == sorted(
        plan.headsets("evals_main", main) + ["L0H0+L8H8", "L1H5+L2H0", "L1H5+L4H4", "L1H5+L6H6", "L1H5+L8H8"])
    assert plan.headsets("evals_universal", main) == ["L1H5", "none"]
    assert plan.headsets("evals_all", rankings) == sorted(
        plan.headsets("evals_methods", rankings) + ["L1H5", "L0H1+L9H9"])
    # universal.heads names a model's universal heads instead: L2H0 (in no other top) is filtered,
    # L1H5 is back in the top k; a model not listed keeps the detected ones
    config["universal"]["heads"] = {"smollm2-135m": ["L2H0"]}
    pinned = Plan(config)
    assert pinned.headsets("evals_main", main, "smollm2-135m") == [
        "L1H5", "L1H5+L3H3", "L1H5+L4H4", "L1H5+L6H6", "L6H6", "none"]
    assert pinned.headsets("evals_universal", main, "smollm2-135m") == ["L2H0", "none"]
    assert pinned.headsets("evals_main", main, "another") == plan.headsets("evals_main", main)
    # detected from damage (the default): the heads rule universal_heads measured, never the rankings'
    config["universal"].update(detect="damage", heads={})
    measured = Plan(config)
    assert measured.headsets("evals_main", main, "smollm2-135m", universal=["L6H6"]) == [
        "L1H5", "L1H5+L2H0", "L1H5+L4H4", "L1H5+L7H7", "none"]
    assert measured.headsets("evals_universal", main, "smollm2-135m", universal=[]) == ["none"]
    with pytest.raises(ValueError, match="detected by damage: read them from rule universal_heads' file"):
        measured.headsets("evals_main", main, "smollm2-135m")


def test_selections_in_a_collection():
    task = {"kind": "task", "method": "greedy"}
    assert not in_collection("evals_main", task, "cs_stratified")
    assert in_collection("evals_methods", task, "cs_stratified")
    assert in_collection("recoveries", task, "cs_stratified")
    assert not in_collection("recoveries_main", task, "cs_stratified")
    assert not in_collection("evals_universal", {"kind": "knowledge", "method": ""}, "cs_stratified")
    unfiltered = {"kind": "unfiltered", "method": "greedy"}
    assert in_collection("evals_methods", unfiltered, "cs_stratified")
    assert not in_collection("evals_main", unfiltered, "cs_stratified")
    assert not in_collection("recoveries", unfiltered, "cs_stratified")
    assert set(COLLECTIONS) == {"models", "tuning", "recoveries", "recoveries_main", "evals_main", "evals_methods",
                                "evals_universal", "evals_knowledge", "evals_all"}


@pytest.mark.parametrize("change", [
    ("models", lambda c: c["models"].pop("smollm2-135m") and c["models"].update(x={"source": "a/b"})),
    ("n_masks", lambda c: c["search"].update(n_masks=16)),
    ("top_k", lambda c: c["validation"].update(top_k=3)),
    ("tasks", lambda c: c["tasks"].pop("induction")),
    ("data file", lambda c: c["tasks"]["ioi"].update(data_file="other.jsonl")),
])
def test_every_config_change_moves_the_collected_tables(change):
    config = validated(accuracy_demo())
    before = Plan(config)
    changed = copy.deepcopy(config)
    change[1](changed)
    after = Plan(changed)
    assert after.digest != before.digest
    assert after.collected_path("evals_main") != before.collected_path("evals_main")
    assert Plan(copy.deepcopy(config)).collected_path("evals_main") == before.collected_path("evals_main")
    assert before.collected_path("evals_main") == f"results/runs/{config_digest(config)}/evals_main.tsv"


def test_report_options_and_tuning_choice():
    plan = Plan(validated(accuracy_demo()))
    assert plan.report_options() == {
        "top_k": 5, "gen_tasks": None, "method": "cs_stratified",
        "capabilities": {"ioi": "ioi", "capitals": "capitals", "induction": "induction"},
        "knowledge_tasks": [], "knowledge_eval_tasks": [], "figure_model": "smollm2-135m",
        "figure_capability": "ioi",
        "units": {"ioi": ["points", "acc"], "capitals": ["points", "acc"], "induction": ["points", "acc"]},
        "directions": {}, "methods": ["cs_stratified"]}
    assert plan.report_options({"ioi": True})["directions"] == {"ioi": True}  # read from the YAMLs by TaskFacts
    wiki = validated({**accuracy_demo(), "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "metric": "acc"},
                                                   "wiki": {"lm_eval_task": "wikitext", "metric": "word_perplexity"}}})
    assert Plan(wiki).units() == {"ioi": "points", "wiki": "own"}
    assert Plan(wiki).report_options()["gen_tasks"] == ["ioi"]  # Delta Gen: changes in percent only
    points = [{"degradation": -10.0, "n_masks": 200, "sparsity": 0.05, "higher_is_better": True},
              {"degradation": -12.5, "n_masks": 400, "sparsity": 0.1, "higher_is_better": True},
              {"degradation": -12.5, "n_masks": 400, "sparsity": 0.05, "higher_is_better": True}]
    assert choose_tuning_point(points) is points[2]  # most degradation, then the cheaper sparsity
    # a lower-is-better metric (a perplexity) degrades most where it rises most
    flipped = [{**point, "higher_is_better": False} for point in points]
    assert choose_tuning_point(flipped) is flipped[0]


# ------------------------------------------------------------------ task files and documents


def test_fields_each_builtin_task_reads():
    expected = {"headloc_ioi": ["choices", "label", "text"], "headloc_capitals": ["capital", "country"],
                "headloc_swear": ["prompt"], "headloc_gsm8k": ["answer", "question"],
                "headloc_arc_challenge": ["answerKey", "choices", "question"],
                "headloc_mbpp": ["code", "test_list", "text"]}  # `is_fewshot is defined` is optional
    for task, fields in expected.items():
        assert required_fields(load_task_yaml(task_yaml(task, [TASKS_DIR]))) == fields
    # and the built-in documents have them
    for name, task in (("ioi", "headloc_ioi"), ("capitals", "headloc_capitals"), ("swear", "headloc_swear")):
        docs = build_docs(name, n_docs=5)
        check_documents(enumerate(docs, 1), expected[task], name, task=task)


def test_task_files_are_the_yaml_its_template_python_and_data():
    files = [p.replace(str(TASKS_DIR) + "/", "") for p in task_files("headloc_ioi", [TASKS_DIR])]
    assert files[:2] == ["headloc_ioi.yaml", "_headloc_template_yaml"]
    assert {"utils.py", "paper_utils.py", "data/capitals.tsv"} <= set(files)
    with pytest.raises(ValueError, match=f"no task YAML defines task 'nope'; searched {TASKS_DIR}"):
        task_files("nope", [TASKS_DIR])


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("lines, message", [
    (['{"text": "a", "choices": ["x", "y"], "label": 0}', '', '{"choices": ["x", "y"], "label": 1}'],
     r"line 3: no field 'text'; task headloc_ioi reads fields choices, label, text \(the document has choices, label\)"),
    (['{"text": "", "choices": ["x", "y"], "label": 0}'],
     r"line 1: field 'text' is empty \(''\); task headloc_ioi needs a value there"),
    (['{"text": "a", "choices": [], "label": 0}'], r"line 1: field 'choices' is empty \(\[\]\)"),
    (['{"text": "a", "choices": ["x", "y"], "label": null}'], r"line 1: field 'label' is empty \(None\)"),
    ([], r"no documents; expected one JSON object per line with fields choices, label, text for task headloc_ioi"),
])
def test_bad_documents_name_file_line_and_field(tmp_path, lines, message):
    path = write(tmp_path / "docs.jsonl", lines)
    fields = required_fields(load_task_yaml(task_yaml("headloc_ioi", [TASKS_DIR])))
    with pytest.raises(ValueError, match=f"{path}(, |: ){message}"):
        check_documents(read_jsonl_numbered(path), fields, str(path), task="headloc_ioi")


def test_good_documents_pass(tmp_path):
    docs = build_docs("ioi", n_docs=3)
    path = write(tmp_path / "docs.jsonl", [json.dumps(d) for d in docs])
    check_documents(read_jsonl_numbered(path), ["choices", "label", "text"], str(path), task="headloc_ioi")


def test_docs_target_table_is_the_registry():
    """docs/targets.md shows headloc.report.target_table() verbatim (regenerate it from there)."""
    assert target_table() in (REPO / "docs/targets.md").read_text()
    assert target_table().count("\n") == 2 + 11 + 5  # header, 11 tables, 5 figures


def test_budgets_repeats_and_shared_rows():
    config = validated(accuracy_demo())
    config["search"].update(methods=["cs_stratified", "cs_bernoulli", "greedy1s", "greedy"], n_masks=200,
                            budgets=[50, 25], repeats=2)
    plan = Plan(config)
    searches = plan.searches["ioi"]
    assert list(searches) == [
        "cs_stratified_m200_p0.05_n20_s0", "cs_stratified_m25of200_p0.05_n20_s0",
        "cs_stratified_m50of200_p0.05_n20_s0", "cs_stratified_m200_p0.05_n20_s0_r1",
        "cs_stratified_m25of200_p0.05_n20_s0_r1", "cs_stratified_m50of200_p0.05_n20_s0_r1",
        "cs_bernoulli_m200_p0.05_n20_s0", "cs_bernoulli_m25of200_p0.05_n20_s0",
        "cs_bernoulli_m50of200_p0.05_n20_s0", "cs_bernoulli_m200_p0.05_n20_s0_r1",
        "cs_bernoulli_m25of200_p0.05_n20_s0_r1", "cs_bernoulli_m50of200_p0.05_n20_s0_r1",
        "greedy1s_n20_s0", "greedy_k5_xu_n20_s0"]  # universal.filter on: greedy's rounds leave them out
    nested = searches["cs_bernoulli_m25of200_p0.05_n20_s0_r1"]
    assert (nested.n_masks, nested.of, nested.seed, nested.repeat) == (25, 200, 1, 1)
    assert nested.rows_of == "cs_bernoulli_m200_p0.05_n20_s0_r1"  # the first 25 rows of repeat 1's design
    assert searches["cs_stratified_m200_p0.05_n20_s0"].rows_of is None
    assert searches["greedy1s_n20_s0"].rows_of == "greedy_k5_xu_n20_s0/round1"  # the same one-shot matrix
    assert plan.main_search("ioi") == "cs_stratified_m200_p0.05_n20_s0"  # full design, repeat 0

    config["validation"]["method"] = "greedy"
    with pytest.raises(ValueError, match="'greedy' with universal.filter on would wait on itself"):
        Plan(config)
    config["universal"]["filter"] = False
    assert Plan(config).main_search("ioi") == "greedy_k5_n20_s0"  # unfiltered greedy: no cycle


def test_each_step_gets_its_parameters_from_the_plan():
    """What each rule's step is told (headloc.methods.steps): the search's own seed (plus the repeat),
    a nested budget's rows, a two-stage design's whole budget, a gradient method's options whole."""
    from headloc.methods import steps
    from headloc.methods.kinds.gradient import GradientParams
    from headloc.methods.kinds.masks import DesignParams, RefineParams

    config = validated(accuracy_demo())
    config["search"].update(methods=["cs_stratified", "cs_adaptive", "chg"], n_masks=200, budgets=[50],
                            repeats=2, alpha=0.01)
    plan = Plan(config)
    assert plan.step_params("ioi", "cs_stratified_m200_p0.05_n20_s0_r1", "design") == DesignParams(
        "cs_stratified", 200, 0.05, 1)
    assert plan.step_params("ioi", "cs_stratified_m50of200_p0.05_n20_s0_r1", "recover", higher_is_better=False) == \
        steps.RecoverParams("cs_stratified", 0.01, 1, 5, False, nested_rows=50)
    assert plan.step_params("ioi", "cs_adaptive_m50_p0.05_n20_s0", "recover").nested_rows is None
    assert plan.step_params("ioi", "cs_adaptive_m50_p0.05_n20_s0", "refine") == RefineParams(50, 5, 0.01, 0)
    assert plan.step_params("ioi", "chg_x4_l0.1_t500_n20_s0", "gradient") == GradientParams(
        "chg", 0, {"seeds": 4, "lam": 0.1, "steps": 500})
    with pytest.raises(ValueError, match="a masks search has no step 'gradient'; its steps: design, refine, recover"):
        plan.step_params("ioi", "cs_adaptive_m50_p0.05_n20_s0", "gradient")


def test_each_kind_s_recovery_reads_the_files_its_rules_write():
    """What rule recover_heads waits for, by kind, spelled out as docs/outputs.md lays a search's folder
    out: a design's chunk scores (both stages' for cs_adaptive), the rows of the search it reuses (a
    nested budget, one-shot greedy on greedy's round 1), greedy's k rounds, a one-job result."""
    config = validated(accuracy_demo())
    config["search"].update(methods=["cs_stratified", "cs_adaptive", "greedy1s", "greedy", "attribution",
                                     "group_testing", "random"], n_masks=40, budgets=[20], chunks=2)
    config["validation"]["top_k"] = 2
    config["universal"]["filter"] = False
    plan = Plan(config)
    folder = "results/m/ioi"

    def chunks(where):
        return [f"{folder}/{where}/scores/0.tsv", f"{folder}/{where}/scores/1.tsv"]

    def samples(where):  # each chunk's per-document scores, beside its scores
        return [f"{folder}/{where}/scores/0.samples.jsonl", f"{folder}/{where}/scores/1.samples.jsonl"]

    design, adaptive = "cs_stratified_m40_p0.05_n20_s0", "cs_adaptive_m40_p0.05_n20_s0"
    expected = {
        design: {"masks": f"{folder}/{design}/masks.npy", "scores": chunks(design), "samples": samples(design)},
        "cs_stratified_m20of40_p0.05_n20_s0": {"masks": f"{folder}/{design}/masks.npy", "scores": chunks(design),
                                               "samples": samples(design)},
        adaptive: {"masks": f"{folder}/{adaptive}/masks.npy", "scores": chunks(adaptive), "samples": samples(adaptive),
                   "stage2_masks": f"{folder}/{adaptive}/stage2/masks.npy", "stage2_scores": chunks(f"{adaptive}/stage2"),
                   "stage2_samples": samples(f"{adaptive}/stage2")},
        "greedy1s_n20_s0": {"masks": f"{folder}/greedy_k2_n20_s0/round1/masks.npy",
                            "scores": chunks("greedy_k2_n20_s0/round1"), "samples": samples("greedy_k2_n20_s0/round1")},
        "greedy_k2_n20_s0": {"rounds": [f"{folder}/greedy_k2_n20_s0/round{r}/chosen.json" for r in (1, 2)]},
        "attribution_n20_s0": {"result": f"{folder}/attribution_n20_s0/gradient.json"},
        "group_testing_m40_k2_gauto_per1_x2_n20_s0": {
            "result": f"{folder}/group_testing_m40_k2_gauto_per1_x2_n20_s0/sequential.json"},
        "random_s0": {"model": ["results/models/m"]},
    }
    for search, files in expected.items():
        assert plan.recovery_inputs("m", "ioi", search, ["results/models/m"]) == files, search


def test_budgets_must_be_below_n_masks():
    config = validated(accuracy_demo())
    config["search"]["budgets"] = [50, 100]
    with pytest.raises(ValueError, match=r"search.budgets: \[100\] not below the 100 masks of task ioi"):
        check_config(config, {})


def test_continuous_search_scores_key_the_mask_searches():
    config = validated(accuracy_demo())
    config["search"]["methods"] = ["cs_stratified", "greedy", "attribution"]
    config["tasks"]["ioi"].update(id_task="headloc_ioi_margin", id_metric="margin")
    plan = Plan(config)
    assert plan.id_scoring("ioi") == ("headloc_ioi_margin", "margin")
    assert plan.id_scoring("capitals") == ("headloc_capitals", "acc")
    assert list(plan.searches["ioi"]) == ["cs_stratified_m100_p0.05_n20_s0_yheadloc_ioi_margin-margin",
                                          "greedy_k5_xu_n20_s0_yheadloc_ioi_margin-margin",
                                          "attribution_n20_s0"]  # gradients: always the gold log-likelihood
    assert list(plan.searches["capitals"])[0] == "cs_stratified_m100_p0.05_n20_s0"
    check_config(config, {})
    config["tasks"]["ioi"]["id_task"] = "headloc_ioi_margn"
    with pytest.raises(ValueError, match="tasks.ioi.id_task: 'headloc_ioi_margn' is not a task of"):
        check_config(config, {})


@pytest.mark.parametrize("path, tasks", [("config/held-out-2.yaml", ("plural", "past_tense")),
                                         ("config/held-out-3.yaml", ("comparative", "language")),
                                         ("config/held-out-4.yaml", ("continent", "first_letter"))])
def test_the_later_held_out_configs_identify_with_what_they_validate(path, tasks):
    """config/held-out-2.yaml, -3 and -4: each task's masks are scored by the measure its top heads are
    validated on, the gold answer's log-likelihood (no accuracy to saturate at five heads)."""
    config = validated(path)
    plan = Plan(config)
    assert sorted(config["tasks"]) == sorted(tasks)
    for task in tasks:
        spec = config["tasks"][task]
        assert plan.id_scoring(task) == (spec["lm_eval_task"], spec["metric"]) == (f"headloc_{task}_loglik", "loglik")
        assert plan.score_suffix(task) == ""
