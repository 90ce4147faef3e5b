"""What the config check reads in each task's YAML before any job: the ``metric,filter`` keys the
task reports (tasks.<name>.metric / id_metric), and every template lm-eval renders with Jinja.

Each case calls headloc.workflow.config.check_workflow_config, the check the Snakefile makes at parse time
(rules/common.smk), on the demo config with a task YAML written to tmp_path (include_path); one
`snakemake -n` run proves the Snakefile stops on such a task before any job.
"""

import copy
import textwrap

import pytest
import yaml

from conftest import REPO, accuracy_demo, snakemake
from headloc.workflow.config import check_workflow_config
from headloc.workflow.task_checks import check_metric
from headloc.data.documents import load_task_yaml, template_errors
from headloc.data.task_scoring import reported_filters, reported_metrics
from headloc.engine.lm_eval_tasks import TaskSpec
from headloc.search.budget import suggested_masks
from headloc.workflow.plan import Plan

DEMO = accuracy_demo()
SCHEMA = REPO / "config/schema.yaml"
OWN = REPO / "src/headloc/tasks"
GSM8K = OWN / "headloc_gsm8k.yaml"
HUMANEVAL = OWN / "headloc_humaneval.yaml"

# a multiple-choice task without metric_list or filter_list
MULTIPLE_CHOICE = """\
        task: mine
        custom_dataset: !function utils.load
        output_type: multiple_choice
        doc_to_text: "{{text}}"
        doc_to_choice: ["a", "b"]
        doc_to_target: label
"""
FIRST_NUMBER = """\
task: mine
dataset_path: json
dataset_kwargs: {data_files: {test: docs.jsonl}}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{answer}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
filter_list:
  - name: first-number
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
      - function: take_first
"""


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Relative paths in a config resolve against tmp_path, as in the dry runs (--directory)."""
    monkeypatch.chdir(tmp_path)


def write_task(folder, text, name="mine.yaml"):
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def demo_with(tmp_path, **ioi) -> dict:
    """The demo config with include_path [tmp_path/tasks] and the task ioi's keys set to ``ioi``."""
    config = copy.deepcopy(DEMO)
    (tmp_path / "tasks").mkdir(exist_ok=True)
    config["include_path"] = [str(tmp_path / "tasks")]
    config["tasks"]["ioi"] = {**config["tasks"]["ioi"], **ioi}
    # the budget advice for SmolLM2's 270 heads: stderr holds only the task notes
    config["search"]["n_masks"] = suggested_masks(270, config["validation"]["top_k"])
    return config


def config_error(config) -> str:
    with pytest.raises(ValueError) as error:
        check_workflow_config(config, SCHEMA)
    return str(error.value)


# ---------------------------------------------------------------- metric and filter


def test_a_bare_metric_takes_the_only_filter_of_the_task(tmp_path, capsys):
    path = write_task(tmp_path / "tasks", FIRST_NUMBER)
    config = demo_with(tmp_path, lm_eval_task="mine", metric="exact_match")
    check_workflow_config(config, SCHEMA)
    assert capsys.readouterr().err == (
        f"note: config tasks.ioi.metric: 'exact_match' read as 'exact_match,first-number': task mine reports "
        f"its metrics under one filter, first-number ({path})\n")
    assert config["tasks"]["ioi"]["metric"] == "exact_match,first-number"
    # what the jobs get: rules/common.smk's options_of_task and task_options read these
    assert Plan(config).id_scoring("ioi") == ("mine", "exact_match,first-number")
    assert TaskSpec("mine", config["tasks"]["ioi"]["metric"]).metric_key == "exact_match,first-number"


def test_a_metric_with_its_filter_passes_unchanged(tmp_path, capsys):
    write_task(tmp_path / "tasks", FIRST_NUMBER)
    config = demo_with(tmp_path, lm_eval_task="mine", metric="exact_match,first-number")
    check_workflow_config(config, SCHEMA)
    assert config["tasks"]["ioi"]["metric"] == "exact_match,first-number"
    assert capsys.readouterr().err == ""


def test_a_bare_metric_on_a_task_of_several_filters(tmp_path):
    out = config_error(demo_with(tmp_path, lm_eval_task="headloc_gsm8k", metric="exact_match"))
    assert out == (f"config tasks.ioi.metric: 'exact_match' is not reported by task headloc_gsm8k ({GSM8K}) under "
                   "filter 'none'; valid: exact_match,strict-match, exact_match,flexible-extract")


def test_a_filter_the_task_does_not_have(tmp_path):
    path = write_task(tmp_path / "tasks", FIRST_NUMBER)
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="exact_match,strict-match"))
    assert out == (f"config tasks.ioi.metric: 'exact_match,strict-match' is not reported by task mine ({path}) "
                   "under filter 'strict-match'; valid: exact_match,first-number")


def test_a_metric_the_task_does_not_report(tmp_path):
    path = write_task(tmp_path / "tasks", FIRST_NUMBER)
    out = config_error(demo_with(tmp_path, lm_eval_task="mine"))  # metric: acc, the default
    assert out == (f"config tasks.ioi.metric: 'acc' is not reported by task mine ({path}); "
                   "valid: exact_match,first-number")


def test_a_task_without_metric_list_reports_lm_eval_defaults(tmp_path):
    path = write_task(tmp_path / "tasks", MULTIPLE_CHOICE)
    check_workflow_config(demo_with(tmp_path, lm_eval_task="mine", metric="acc_norm"), SCHEMA)
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="exact_match"))
    assert out == (f"config tasks.ioi.metric: 'exact_match' is not reported by task mine ({path}); "
                   "valid: acc,none, acc_norm,none")


def test_python_metrics_are_checked_only_for_their_filter(tmp_path, capsys):
    """process_results (headloc's generation tasks) names its metrics only when it runs: any metric
    name its metric_list declares a direction for passes, under a filter the task has."""
    check_workflow_config(demo_with(tmp_path, lm_eval_task="headloc_swear", metric="profane_words"), SCHEMA)
    config = demo_with(tmp_path, lm_eval_task="headloc_humaneval", metric="pass_at_1")
    check_workflow_config(config, SCHEMA)
    assert config["tasks"]["ioi"]["metric"] == "pass_at_1,create_test"
    assert "'pass_at_1' read as 'pass_at_1,create_test'" in capsys.readouterr().err
    out = config_error(demo_with(tmp_path, lm_eval_task="headloc_humaneval", metric="pass_at_1,none"))
    assert out == (f"config tasks.ioi.metric: 'pass_at_1,none' is not reported by task headloc_humaneval "
                   f"({HUMANEVAL}) under filter 'none'; valid filters: create_test (e.g. pass_at_1,create_test; "
                   "its metric names are known only when it runs)")


def test_a_generation_metric_outside_lm_evals_registry_passes_with_its_direction(tmp_path):
    """Hugging Face evaluate's metrics (and !function ones) name their own keys: only a run can tell
    the name, but its direction must be declared (here in the task's metric_list)."""
    path = write_task(tmp_path / "tasks", FIRST_NUMBER.replace("metric: exact_match", "metric: rouge"))
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="rouge1,first-number"))
    assert out.startswith(f"config tasks.ioi.metric: 'rouge1,first-number' of task mine ({path}) has no declared "
                          "direction") and out.endswith("expected a metric_list entry '- metric: rouge1' with "
                                                        "'higher_is_better: true' (or false)")
    write_task(tmp_path / "tasks", FIRST_NUMBER.replace("metric: exact_match", "metric: rouge1"))
    check_workflow_config(demo_with(tmp_path, lm_eval_task="mine", metric="rouge1,first-number"), SCHEMA)


def test_a_metrics_direction_is_read_from_the_task_then_lm_eval(tmp_path):
    """metric_list's higher_is_better first (it may differ from lm-eval's registry), then the registry
    (a loglikelihood_rolling task's perplexities are lower-is-better); a metric neither declares is refused."""
    from headloc.data.task_scoring import metric_direction

    assert metric_direction({"metric_list": [{"metric": "acc", "higher_is_better": False}]}, "acc,none") is False
    assert metric_direction({"output_type": "loglikelihood_rolling"}, "word_perplexity,none") is False
    assert metric_direction({}, "bits_per_byte") is False and metric_direction({}, "acc_norm") is True
    assert metric_direction({"metric_list": [{"metric": "margin"}]}, "margin") is None
    path = write_task(tmp_path / "tasks", MULTIPLE_CHOICE + """\
        metric_list:
          - metric: acc
          - metric: margin
        """)
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="margin"))
    assert out.startswith(f"config tasks.ioi.metric: 'margin' of task mine ({path}) has no declared direction")
    out = config_error(demo_with(tmp_path, id_task="mine", id_metric="margin"))
    assert out.startswith(f"config tasks.ioi.id_metric: 'margin' of task mine ({path}) has no declared direction")



# How YAML reads each spelling of a direction: only true and false are booleans; the quoted ones are
# strings (bool("false") is True), and YAML 1.1's yes/no/on/off are strings to PyYAML's safe loader
# only when quoted.
NOT_BOOLEANS = ['"false"', "'False'", '"no"', '"0"', "0", "1", '"true"']


@pytest.mark.parametrize("spelled", NOT_BOOLEANS)
def test_a_direction_that_is_not_a_yaml_boolean_is_refused(tmp_path, spelled):
    """A quoted "false" (or 0, or "no") in metric_list is refused before any job, naming the value, the
    task, the metric, the file and what is valid; bool() would have read "false" as higher-is-better."""
    path = write_task(tmp_path / "tasks", MULTIPLE_CHOICE + f"""\
        metric_list:
          - metric: acc
          - metric: margin
            higher_is_better: {spelled}
        """)
    value = yaml.safe_load(spelled)
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="margin"))
    assert out == (f"config tasks.ioi.metric: 'margin' is read from {path}, where task 'mine', metric_list entry "
                   f"'margin': higher_is_better {value!r} is a {type(value).__name__}, not a boolean; expected True "
                   "or False (in a task YAML: true or false, unquoted)")


def test_a_direction_in_an_included_yaml_names_the_file_that_sets_it(tmp_path):
    base = write_task(tmp_path / "tasks", MULTIPLE_CHOICE.replace("task: mine", "task: base") + """\
        metric_list:
          - metric: margin
            higher_is_better: "false"
        """, name="base.yaml")
    write_task(tmp_path / "tasks", "include: base.yaml\ntask: mine\n")
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="margin"))
    assert out.startswith(f"config tasks.ioi.metric: 'margin' is read from {base}, where task 'mine'")


@pytest.mark.parametrize("spelled, expected", [("true", True), ("false", False), ("True", True), ("FALSE", False)])
def test_an_unquoted_yaml_boolean_is_read_as_declared(tmp_path, spelled, expected):
    """Against the refusal above: every spelling YAML reads as a boolean passes, in its direction."""
    from headloc.api.tasks import resolve_task
    from headloc.data.task_scoring import metric_direction

    path = write_task(tmp_path / "tasks", MULTIPLE_CHOICE + f"""\
        metric_list:
          - metric: margin
            higher_is_better: {spelled}
        """)
    check_workflow_config(demo_with(tmp_path, lm_eval_task="mine", metric="margin"), SCHEMA)
    assert metric_direction(load_task_yaml(path), "margin,none") is expected
    assert resolve_task(str(path), metric="margin").higher_is_better is expected


def test_locate_refuses_a_direction_that_is_not_a_boolean(tmp_path, tokenizer):
    """The library reads the same declaration, and its own higher_is_better argument must be a boolean
    too (refused when the task is resolved, before anything is scored)."""
    from headloc import locate

    from conftest import tiny_llama

    model = tiny_llama(len(tokenizer))

    quoted = write_task(tmp_path / "tasks", MULTIPLE_CHOICE + """\
        metric_list:
          - metric: margin
            higher_is_better: "false"
        """)
    with pytest.raises(ValueError) as error:
        locate(model, tokenizer, str(quoted), metric="margin")
    assert str(error.value) == (f"{quoted}: task 'mine', metric_list entry 'margin': higher_is_better 'false' is "
                                "a str, not a boolean; expected True or False (in a task YAML: true or false, unquoted)")
    silent = write_task(tmp_path / "tasks", MULTIPLE_CHOICE.replace("task: mine", "task: silent") + """\
        metric_list:
          - metric: margin
        """, name="silent.yaml")
    for given in ("false", "no", 0, 1):
        with pytest.raises(ValueError, match=f"^the higher_is_better argument for task 'silent': higher_is_better "
                                             f"{given!r} is a {type(given).__name__}, not a boolean"):
            locate(model, tokenizer, str(silent), metric="margin", higher_is_better=given)
        with pytest.raises(ValueError, match=f"^callable task 'lambda': higher_is_better {given!r} is a"):
            locate(model, None, lambda model: 0.0, higher_is_better=given)


def test_id_metric_is_checked_against_id_task(tmp_path, capsys):
    path = write_task(tmp_path / "tasks", MULTIPLE_CHOICE + """\
        metric_list:
          - metric: acc
        filter_list:
          - name: first-number
            filter: [{function: take_first}]
        """)
    out = config_error(demo_with(tmp_path, id_task="mine"))  # id_metric null: id_task scores metric acc
    assert out == (f"config tasks.ioi.id_metric: null (metric 'acc') is not reported by task mine ({path}) "
                   "under filter 'none'; valid: acc,first-number")
    config = demo_with(tmp_path, id_task="mine", id_metric="acc")
    check_workflow_config(config, SCHEMA)
    assert (config["tasks"]["ioi"]["metric"], config["tasks"]["ioi"]["id_metric"]) == ("acc", "acc,first-number")
    assert capsys.readouterr().err.startswith("note: config tasks.ioi.id_metric: 'acc' read as 'acc,first-number'")
    assert Plan(config).id_scoring("ioi") == ("mine", "acc,first-number")


def test_what_a_task_yaml_reports():
    assert (reported_metrics({}), reported_filters({})) == (["exact_match"], ["none"])
    gsm8k = load_task_yaml(GSM8K)
    assert (reported_metrics(gsm8k), reported_filters(gsm8k)) == (["exact_match"], ["strict-match", "flexible-extract"])
    unknown = [{"class": None}, {"process_results": None}, {"metric_list": [{"metric": None}]},
               {"metric_list": [{"metric": "exact_match", "hf_evaluate": True}]}]
    assert [reported_metrics(c) for c in unknown] == [None] * 4
    assert reported_filters({"class": None}) is None
    # a Python task class reports what it likes: nothing is checked
    assert check_metric("anything,at-all", "t", "t.yaml", {"class": None}) == ("anything,at-all", None, None)


def test_headloc_tasks_report_the_metrics_their_yaml_names():
    """Each of headloc's own tasks passes the check with the metric,filter its YAML names, and its
    templates parse."""
    for path in sorted(OWN.glob("headloc_*.yaml")):
        task_config = load_task_yaml(path)
        assert template_errors(task_config) == [], path
        filters = reported_filters(task_config)
        for entry in task_config["metric_list"]:
            for filter_name in filters:
                key = f"{entry['metric']},{filter_name}"
                assert check_metric(key, path.stem, path, task_config) == (key, None, None)


def test_shipped_configs_pass_unchanged(monkeypatch, capsys):
    """Every config/*.yaml passes, and no metric of theirs is rewritten."""
    monkeypatch.chdir(REPO)
    for path in sorted((REPO / "config").glob("*.yaml")):
        if path.name in ("schema.yaml", "ground_truth.yaml"):  # not workflow configs
            continue
        config = yaml.safe_load(path.read_text())
        given = {name: (spec.get("metric", "acc"), spec.get("id_metric")) for name, spec in config["tasks"].items()}
        check_workflow_config(config, SCHEMA)
        assert {name: (spec["metric"], spec["id_metric"]) for name, spec in config["tasks"].items()} == given, path
    # the only notes: budget advice where a config spends fewer masks than advised, and a budget key
    # some methods of a grid ignore while others spend it (never one that no method reads)
    notes = capsys.readouterr().err.splitlines()
    advice = [note for note in notes if " masks for " in note and "'Budget advice'" in note]
    mixed = [note for note in notes if " is ignored for " in note and note.endswith(" it")]
    assert [note for note in notes if note not in advice + mixed] == []


# ---------------------------------------------------------------- Jinja templates


def test_a_jinja_syntax_error_names_the_task_file_and_key(tmp_path):
    path = write_task(tmp_path / "tasks", FIRST_NUMBER.replace('"Question: {{question}}\\nAnswer:"', '"{{question"'))
    out = config_error(demo_with(tmp_path, lm_eval_task="mine", metric="exact_match,first-number"))
    assert out == (f"config tasks.ioi.lm_eval_task: task mine ({path}) key doc_to_text: Jinja syntax error: "
                   "unexpected end of template, expected 'end of print statement' (line 1)")


def test_every_template_lm_eval_renders_is_parsed(tmp_path):
    """description, gen_prefix and fewshot_config's templates too; an included file is named."""
    write_task(tmp_path / "tasks", """\
        description: "About {% if subject %}{{subject}}."
        """, name="_base_yaml")
    path = write_task(tmp_path / "tasks", """\
        include: _base_yaml
        task: mine
        custom_dataset: !function utils.load
        output_type: multiple_choice
        doc_to_text: "{{text}}"
        doc_to_choice: ["{{", "b"]
        doc_to_target: label
        gen_prefix: "Answer:\\n{{ a b }}"
        fewshot_config:
          sampler: first_n
          doc_to_target: "{{label | }}"
        """)
    out = config_error(demo_with(tmp_path, lm_eval_task="mine"))
    base = tmp_path / "tasks" / "_base_yaml"
    assert out.splitlines() == [
        f"config tasks.ioi.lm_eval_task: task mine ({path}) key description (set in its include {base}): Jinja "
        "syntax error: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or "
        "'endif'. The innermost block that needs to be closed is 'if' (line 1)",
        f"config tasks.ioi.lm_eval_task: task mine ({path}) key gen_prefix: Jinja syntax error: expected token "
        "'end of print statement', got 'b' (line 2)",
        f"config tasks.ioi.lm_eval_task: task mine ({path}) key fewshot_config.doc_to_target: Jinja syntax error: "
        "expected token 'name', got 'end of print statement' (line 1)",
    ]  # doc_to_choice's list holds literal choices, not templates


def test_id_task_templates_are_parsed(tmp_path):
    path = write_task(tmp_path / "tasks", f"""\
        include: {OWN / "headloc_ioi.yaml"}
        task: mine
        doc_to_text: "{{{{text"
        """)
    out = config_error(demo_with(tmp_path, id_task="mine", id_metric="acc"))
    assert out == (f"config tasks.ioi.id_task: task mine ({path}) key doc_to_text: Jinja syntax error: unexpected "
                   "end of template, expected 'end of print statement' (line 1)")


# ---------------------------------------------------------------- the Snakefile calls it


def test_dry_run_stops_on_a_jinja_syntax_error(tmp_path):
    path = write_task(tmp_path / "tasks", FIRST_NUMBER.replace('"Question: {{question}}\\nAnswer:"', '"{{question"'))
    config = demo_with(tmp_path, lm_eval_task="mine", metric="exact_match,first-number")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(tmp_path / "bad.yaml"),
                       cwd=tmp_path, check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert (f"config tasks.ioi.lm_eval_task: task mine ({path}) key doc_to_text: Jinja syntax error: "
            "unexpected end of template, expected 'end of print statement' (line 1)") in out
    assert not (tmp_path / "results").exists(), "no job may run"
    assert "Job stats" not in out, "the DAG must not be built"


def test_a_gradient_method_on_a_task_without_gold_continuation_is_refused(tmp_path):
    """The output_type is read: loglikelihood_rolling (a perplexity) has no gold continuation for
    attribution or CHG to differentiate, so a search that would fail in its job fails the check."""
    path = write_task(tmp_path / "tasks", """\
        task: mine
        dataset_path: json
        dataset_kwargs: {data_files: {test: docs.jsonl}}
        test_split: test
        output_type: loglikelihood_rolling
        doc_to_text: ""
        doc_to_target: "{{text}}"
        """)
    config = demo_with(tmp_path, lm_eval_task="mine", metric="word_perplexity", id_task=None, id_metric=None)
    config["search"]["methods"] = ["cs_stratified", "attribution"]
    out = config_error(config)
    assert out.startswith(f"config search.methods: attribution differentiates a gold continuation's log-likelihood, "
                          f"and task mine ({path}) has no gold continuation: its output_type loglikelihood_rolling "
                          "scores whole documents")
    config["search"]["methods"] = ["cs_stratified", "guided_greedy"]  # scores masks, and differentiates too
    out = config_error(config)
    assert out.startswith("config search.methods: guided_greedy differentiates a gold continuation's")
    assert "guided_greedy" not in out[out.index("expected methods that only score masks"):]
    config["search"]["methods"] = ["cs_stratified"]
    check_workflow_config(config, SCHEMA)


def test_delta_gen_takes_no_task_in_its_own_unit(tmp_path):
    """Delta Gen averages changes in percent: a perplexity among validation.gen_tasks is refused."""
    config = demo_with(tmp_path)
    config["tasks"]["wiki"] = {"lm_eval_task": "headloc_ioi", "metric": "acc", "localize": False}
    config["validation"]["gen_tasks"] = ["wiki"]
    check_workflow_config(copy.deepcopy(config), SCHEMA)
    config["tasks"]["wiki"]["metric"] = "perplexity"
    out = config_error(config)
    assert out.startswith("config validation.gen_tasks[0]: 'wiki' is scored by 'perplexity', shown in its own unit")
