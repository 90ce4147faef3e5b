"""headloc.workflow.config's named checks, one at a time, and the normalisation before them.

Each check takes the validated config (and what it checks against) and returns its problems as
(config key, text) pairs; check_config joins them as "config <key>: <text>" lines
(tests/unit/test_config.py and tests/workflow/test_config_errors.py pin the whole messages).
"""

import ast
import copy

import pytest

from conftest import REPO, accuracy_demo
from headloc.heads import HeadGeometry
from headloc.search.budget import suggested_masks
from headloc.workflow.config import check_config, complete_metrics
from headloc.workflow.schema import validate_config
from headloc.workflow.task_lookup import TaskLookup, TaskYaml
from headloc.workflow.method_checks import budget_notes, check_budgets, check_methods
from headloc.workflow.task_checks import check_direction, check_documents, check_id_docs, check_scoring, check_templates
from headloc.workflow.key_checks import check_caps, check_gen_tasks, check_heads, check_include_path, check_masks_per_pass, check_mirror, check_report_choices, check_searched_tasks, check_task_lists, check_universal_models
from headloc.workflow.plan import config_digest

SCHEMA = REPO / "config/schema.yaml"
MASK_ONLY = "cs_stratified, cs_bernoulli, cs_adaptive, greedy, greedy1s, group_testing, conditional_group_testing, thompson"
FIRST_NUMBER = """\
task: mine
dataset_path: json
output_type: generate_until
doc_to_text: "{{question}}"
doc_to_target: "{{answer}}"
metric_list: [{metric: exact_match, higher_is_better: true}]
filter_list: [{name: first-number, filter: [{function: take_first}]}]
"""


@pytest.fixture
def config():
    found = accuracy_demo()
    validate_config(found, SCHEMA)
    return found


def keys(problems):
    return [key for key, _ in problems]


def test_the_task_lists():
    demo = accuracy_demo()
    validate_config(demo, SCHEMA)
    assert check_searched_tasks(demo) == []
    demo["validation"]["gen_tasks"] = ["ioi", "boolq"]
    demo["knowledge"].update(tasks=["ioi", "mmlu"], eval_tasks=["wmdp"], min_tasks=3)
    demo["tuning"]["tasks"] = ["x"]
    assert check_gen_tasks(demo) == [("validation.gen_tasks[1]", "'boolq' is not a configured task; valid: "
                                                                 "ioi, capitals, induction")]
    assert keys(check_task_lists(demo)) == ["knowledge.tasks[1]", "knowledge.eval_tasks[0]", "tuning.tasks[0]",
                                            "knowledge.min_tasks"]
    for spec in demo["tasks"].values():
        spec["localize"] = False
    assert keys(check_searched_tasks(demo)) == ["tasks"]
    assert "'ioi' is not a searched task (localize: true); valid: (none)" in check_task_lists(demo)[0][1]


def test_delta_gen_tasks_are_in_percent(config):
    config["tasks"]["wiki"] = {"lm_eval_task": "headloc_ioi", "metric": "word_perplexity", "localize": False}
    config["validation"]["gen_tasks"] = ["wiki"]
    assert keys(check_gen_tasks(config)) == ["validation.gen_tasks[0]"]
    config["tasks"]["wiki"]["relative"] = True  # shown in percent of its unablated score
    assert check_gen_tasks(config) == []


def test_models_report_folders_and_mirror(config, tmp_path):
    config["models"]["smollm2-135m"].update(batch_size=4, masks_per_pass=8)
    assert keys(check_masks_per_pass(config)) == ["models.smollm2-135m.masks_per_pass"]
    config["report"].update(model="llama", capability="ioi")
    assert keys(check_report_choices(config)) == ["report.model"]
    config["include_path"] = [str(tmp_path), str(tmp_path / "no")]
    assert keys(check_include_path(config)) == ["include_path[1]"]
    config["data"]["mirror"] = str(tmp_path / "no")
    assert keys(check_mirror(config)) == ["data.mirror"]
    config["universal"]["heads"] = {"llama": ["L0H0"], "smollm2-135m": ["L0H0"]}
    assert keys(check_universal_models(config)) == ["universal.heads.llama"]


def test_heads_against_one_model(config):
    geometry = HeadGeometry(2, 4)
    assert check_heads(config, "smollm2-135m", geometry) == []  # top_k 5 of 8 heads
    config["validation"]["headsets"] = ["L1H3+L2H0"]
    config["universal"]["heads"] = {"smollm2-135m": ["L0H4"]}
    config["knowledge"]["top_n"] = 9
    assert check_heads(config, "smollm2-135m", geometry) == [
        ("validation.headsets[0]", "head L2H0 is outside the model: model smollm2-135m has layers 0..1 and heads 0..3"),
        ("universal.heads.smollm2-135m[0]", "head L0H4 is outside the model: model smollm2-135m has layers 0..1 and "
                                            "heads 0..3"),
        ("knowledge.top_n", "9 is larger than the 8 heads of model smollm2-135m (2 layers x 4); expected 1..8"),
    ]


def test_budgets_chunks_and_the_budget_advice(config):
    advised = suggested_masks(270, config["validation"]["top_k"])
    config["search"].update(n_masks=advised, budgets=[10, advised], chunks=advised + 1)
    assert keys(check_budgets(config, "ioi")) == ["search.budgets", "search.chunks"]
    config["tasks"]["ioi"]["search"] = {"methods": ["greedy"]}  # greedy scores no mask design
    assert check_budgets(config, "ioi") == []
    geometries = {"smollm2-135m": HeadGeometry(30, 9), "unknown": None}
    assert budget_notes(config, geometries, ["ioi", "capitals"]) == []
    config["search"]["n_masks"] = advised - 1
    (note,) = budget_notes(config, geometries, ["ioi", "capitals"])  # ioi runs greedy only
    assert note.startswith(f"note: config search.n_masks: {advised - 1} masks for capitals on model smollm2-135m")


def test_a_sequential_search_s_cap_against_its_configured_groups(config):
    """check_caps reads group testing's options from the config: groups of 2 over SmolLM2's 270 heads
    take the baseline and 135 groups, so 100 masks are refused; the default groups (16) need 18."""
    config["search"].update(methods=["cs_stratified", "group_testing"], n_masks=100)
    geometry = HeadGeometry(30, 9)
    assert check_caps(config, "smollm2-135m", geometry) == []
    config["group_testing"]["group_size"] = 2
    problems = check_caps(config, "smollm2-135m", geometry)
    assert len(problems) == len(config["tasks"]) and set(keys(problems)) == {"search.n_masks"}  # one per task
    assert "groups of 2): it needs at least 136" in problems[0][1]


def test_identification_subset(config):
    config["tasks"]["ioi"]["id_docs"] = 101
    assert keys(check_id_docs(config, "ioi")) == ["tasks.ioi.id_docs"]
    config["tasks"]["ioi"]["localize"] = False  # not searched: no subset to draw
    assert check_id_docs(config, "ioi") == []


def test_checks_of_a_task_yaml(config, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(FIRST_NUMBER)
    read = TaskYaml("mine", path, {"output_type": "loglikelihood_rolling", "dataset_path": "json",
                                   "doc_to_text": "{{text"})
    assert keys(check_templates("tasks.ioi.lm_eval_task", read)) == ["tasks.ioi.lm_eval_task"]
    assert check_direction("tasks.ioi.metric", "word_perplexity,none", read) == []  # lm-eval's registry says
    assert keys(check_direction("tasks.ioi.metric", "margin", read)) == ["tasks.ioi.metric"]
    config["tasks"]["ioi"].update(data_file=str(tmp_path / "no.jsonl"), dataset_kwargs={"a": 1})
    assert keys(check_documents(config, "ioi", read)) == ["tasks.ioi.data_file", "tasks.ioi.dataset_kwargs",
                                                          "tasks.ioi.data_file"]
    config["search"]["methods"] = ["cs_stratified", "attribution"]
    (problem,) = check_methods(config, "ioi", read)
    assert problem == ("search.methods", f"attribution differentiates a gold continuation's log-likelihood, and task mine "
                       f"({path}) has no gold continuation: its output_type loglikelihood_rolling scores whole "
                       "documents: there is no continuation to call gold; expected methods that only score masks for "
                       f"it: {MASK_ONLY}")


def test_what_scores_a_task(config, tmp_path):
    config["include_path"] = [str(tmp_path)]
    (tmp_path / "mine.yaml").write_text(FIRST_NUMBER)
    config["tasks"]["ioi"].update(lm_eval_task="mine", metric="exact_match")
    tasks = TaskLookup(config)
    assert tasks.defined_as("mine") == "task" and tasks.defined_as("mmlu") == "group"
    assert tasks.defined_as("no_such_task") is None
    read = tasks.read("mine")
    assert check_scoring(config, "ioi", read, tasks) == []  # a bare name the normalisation completes
    config["tasks"]["ioi"].update(id_task="headloc_ioi_margin", id_metric="margin")
    assert keys(check_scoring(config, "ioi", read, tasks)) == ["tasks.ioi.id_task"]  # other documents
    config["tasks"]["ioi"]["id_task"] = "nope"
    assert tasks.scorer(config["tasks"]["ioi"], read) is None
    assert keys(check_scoring(config, "ioi", read, tasks)) == ["tasks.ioi.id_task"]


def test_metric_names_are_completed_before_the_digest_and_the_check_changes_nothing(config, tmp_path):
    config["include_path"] = [str(tmp_path)]
    (tmp_path / "mine.yaml").write_text(FIRST_NUMBER)
    config["tasks"]["ioi"].update(lm_eval_task="mine", metric="exact_match")
    config["tasks"]["capitals"].update(lm_eval_task="headloc_capitals_loglik", metric="loglik")
    config["tasks"]["induction"]["lm_eval_task"] = "mmlu"  # a group: refused by the check, left alone here
    given = copy.deepcopy(config)
    with pytest.raises(ValueError) as error:  # the group's problem only: the bare name passes
        check_config(given, {})
    assert str(error.value).startswith("config tasks.induction.lm_eval_task: 'mmlu' is an lm-eval group")
    assert len(str(error.value).splitlines()) == 1
    assert given == config, "the check leaves the config as it is"
    notes = complete_metrics(config)
    assert notes == [f"note: config tasks.ioi.metric: 'exact_match' read as 'exact_match,first-number': task mine "
                     f"reports its metrics under one filter, first-number ({tmp_path / 'mine.yaml'})"]
    assert config["tasks"]["ioi"]["metric"] == "exact_match,first-number"
    assert config_digest(config) != config_digest(given)
    completed = copy.deepcopy(config)
    assert complete_metrics(config) == [] and config == completed  # idempotent


@pytest.mark.parametrize("module", ["config", "key_checks", "task_checks", "method_checks", "schema", "task_lookup"])
def test_no_function_of_the_config_checks_is_over_60_lines(module):
    tree = ast.parse((REPO / f"src/headloc/workflow/{module}.py").read_text())
    long = {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60}
    assert long == {}
