"""A bad config fails before any job, with a message naming the key and what is valid.

Every message comes from headloc.workflow.config.check_workflow_config, the one function the Snakefile calls
on its config at parse time (rules/common.smk): each case calls it in-process on the demo config
(the embedded SmolLM2: 30 layers x 9 heads, read from the GGUF header) with one key broken. Two
`snakemake -n` runs, one schema error and one cross-key error, prove that the Snakefile calls it and
stops before building the DAG.
"""

import copy
import json

import pytest
import yaml

from conftest import REPO, snakemake
from headloc import methods
from headloc.workflow.config import check_workflow_config

DEMO = yaml.safe_load((REPO / "config/demo.yaml").read_text())
# the budget checks below are those of a search with a cap (the demo's screened_greedy has none)
DEMO["search"]["methods"], DEMO["validation"]["method"] = ["group_testing"], "group_testing"
DEMO["search"]["n_masks"] = 100  # written out, as a user of a budgeted method would (the demo leaves it out)
SCHEMA = REPO / "config/schema.yaml"


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Relative paths in a config resolve against tmp_path, as in the dry runs (--directory)."""
    monkeypatch.chdir(tmp_path)


def broken(change) -> dict:
    config = copy.deepcopy(DEMO)
    change(config)
    return config


def config_error(change) -> str:
    """What check_workflow_config raises on the demo config after ``change``."""
    config = broken(change)
    with pytest.raises(ValueError) as error:
        check_workflow_config(config, SCHEMA)
    return str(error.value)


def dry_run_error(tmp_path, change) -> str:
    """What `snakemake -n` prints on the demo config after ``change``; it must fail before any job."""
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(broken(change), sort_keys=False))
    result = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(tmp_path / "bad.yaml"),
                       cwd=tmp_path, check=False)
    assert result.returncode != 0
    assert not (tmp_path / "results").exists(), "no job may run"
    assert "Job stats" not in result.stdout, "the DAG must not be built"
    return result.stdout + result.stderr


def set_key(*path, value):
    def change(config):
        node = config
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return change


def test_the_demo_config_passes():
    config = copy.deepcopy(DEMO)
    check_workflow_config(config, SCHEMA)
    assert config["search"]["seed"] == 0, "the schema's defaults are filled in"


# ---------------------------------------------------------------- the Snakefile calls it


def test_dry_run_stops_on_a_schema_error(tmp_path):
    change = set_key("models", "smollm2-135m", "dtype", value="fp8")
    out = dry_run_error(tmp_path, change)
    assert "config models.smollm2-135m.dtype: 'fp8' is not valid; expected one of: float32, bfloat16, float16" in out
    assert config_error(change) in out


def test_dry_run_stops_on_a_head_outside_the_model(tmp_path):
    change = set_key("validation", "headsets", value=["L99H0"])
    out = dry_run_error(tmp_path, change)
    assert ("config validation.headsets[0]: head L99H0 is outside the model: "
            "model smollm2-135m has layers 0..29 and heads 0..8") in out
    assert config_error(change) in out


def test_dry_run_refuses_a_group_testing_cap_below_one_partition(tmp_path):
    """The demo's config with group testing: a cap of 3 cannot score the 17 groups of 16 of
    SmolLM2's 270 heads, whose ranking would put unmeasured heads in the top k; refused at parse."""
    change = set_key("search", "n_masks", value=3)
    out = dry_run_error(tmp_path, change)
    assert ("config search.n_masks: 3 is too small for group_testing on smollm2-135m (270 heads, groups of 16): it "
            "needs at least 18 to score the unablated model and one partition of 17 groups; give n_masks >= 18") in out
    assert config_error(change) in out


def test_dry_run_stops_on_an_encoder_checkpoint(tmp_path):
    """A BERT folder (config.json and weights, built with transformers) is no model headloc can
    ablate: refused at parse, naming the supported model types."""
    from architectures import tiny_decoder

    tiny_decoder("bert").save_pretrained(tmp_path / "bert")
    change = set_key("models", "smollm2-135m", "source", value=str(tmp_path / "bert"))
    out = dry_run_error(tmp_path, change)
    assert (f"config models.smollm2-135m.source: '{tmp_path / 'bert'}': model_type 'bert' is an encoder "
            "(bidirectional attention), not a causal decoder; headloc ablates the heads of decoder-only models; "
            "supported model types: afmoe, apertus,") in out
    assert config_error(change) in out


# ---------------------------------------------------------------- the schema


def test_enum_names_the_allowed_values():
    out = config_error(set_key("models", "smollm2-135m", "dtype", value="fp8"))
    assert "config models.smollm2-135m.dtype: 'fp8' is not valid; expected one of: float32, bfloat16, float16" in out


def test_wrong_type():
    out = config_error(set_key("search", "n_masks", value="many"))
    assert "config search.n_masks: 'many' is not valid; expected an integer >= 2" in out


@pytest.mark.parametrize("value,bound", [(1.5, "< 1"), (0, "> 0")])
def test_sparsity_outside_0_1(value, bound):
    out = config_error(set_key("search", "sparsity", value=value))
    assert f"config search.sparsity: {value} is not {bound}; expected a number in (0, 1)" in out


def test_unknown_key():
    out = config_error(set_key("search", "n_mask", value=3))
    assert "config search: unknown key 'n_mask'; valid keys: alpha, budgets, chunks, id_docs, methods, n_masks, repeats" in out


def test_unknown_method():
    out = config_error(set_key("search", "methods", value=["lasso"]))
    known = ", ".join(methods.names())  # the schema's enum is the registry
    assert f"config search.methods[0]: 'lasso' is not valid; expected one of: {known}" in out


def test_empty_task_list():
    out = config_error(set_key("tasks", value={}))
    assert "config tasks: {} is empty; expected at least 1 entry" in out


# ---------------------------------------------------------------- models, tasks and cross-key rules


def test_unknown_model():
    out = config_error(set_key("models", "smollm2-135m", "source", value="smollm3"))
    assert "config models.smollm2-135m.source: unknown model 'smollm3': expected an embedded model" in out


def test_unknown_lm_eval_task(tmp_path):
    (tmp_path / "mine").mkdir()
    change = set_key("tasks", "ioi", "lm_eval_task", value="headloc_io")
    out = config_error(lambda c: (change(c), c.update(include_path=[str(tmp_path / "mine")])))
    assert (f"config tasks.ioi.lm_eval_task: 'headloc_io' is not a task of {REPO / 'src/headloc/tasks'}, "
            f"{tmp_path / 'mine'} nor of lm-eval's registry; put its YAML in a folder and add the folder to the "
            "config key include_path (headloc's own tasks: headloc_antonyms, headloc_antonyms_loglik, headloc_arc_challenge") in out


def test_missing_include_folder():
    out = config_error(set_key("include_path", value=["no/such/folder"]))
    assert "config include_path[0]: 'no/such/folder' is not a directory; expected a folder of lm-eval task YAMLs" in out


def test_a_group_is_not_one_task():
    out = config_error(set_key("tasks", "ioi", "lm_eval_task", value="mmlu"))
    assert ("config tasks.ioi.lm_eval_task: 'mmlu' is an lm-eval group, not one task; headloc scores one task per "
            "entry of tasks: name one of its subtasks (one entry each)") in out


def test_data_file_for_a_task_that_reads_its_own_documents(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"question": "q", "answerKey": "A"}\n')
    change = set_key("tasks", "ioi", value={"lm_eval_task": "arc_easy", "data_file": str(tmp_path / "docs.jsonl")})
    out = config_error(change)
    assert ("config tasks.ioi.data_file: task arc_easy reads its documents itself (dataset_path 'allenai/ai2_arc'), "
            "so headloc has nothing to pass data_file to; set data_files and other loader options in its YAML's "
            "dataset_kwargs") in out


def test_chat_task_on_a_model_without_chat_template(tmp_path):
    # a checkpoint folder as the check reads it offline: config.json, a weight file and a tokenizer
    # config without chat_template (and no chat_template.jinja or .json beside it)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                                                   "num_attention_heads": 4}))
    (model / "model.safetensors").write_bytes(b"")
    (model / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer"}))

    def change(config):
        config["models"] = {"plain": {"source": str(model)}}
        config["tasks"]["ioi"]["chat"] = True
    out = config_error(change)
    assert (f"config tasks.ioi.chat: task ioi needs a chat template, but the tokenizer of model plain ({model}) "
            "has none; use a chat model or set chat: false") in out


def test_unknown_task_name():
    out = config_error(set_key("validation", "gen_tasks", value=["ioi", "hellaswag"]))
    assert "config validation.gen_tasks[1]: 'hellaswag' is not a configured task; valid: ioi, capitals, induction" in out


def test_head_outside_the_model():
    out = config_error(set_key("validation", "headsets", value=["L99H0"]))
    assert ("config validation.headsets[0]: head L99H0 is outside the model: "
            "model smollm2-135m has layers 0..29 and heads 0..8") in out


def test_top_k_larger_than_the_heads():
    out = config_error(set_key("validation", "top_k", value=271))
    assert "config validation.top_k: 271 is larger than the 270 heads of model smollm2-135m" in out


def test_identification_subset_larger_than_the_dataset():
    out = config_error(set_key("tasks", "ioi", "id_docs", value=150))
    assert "config tasks.ioi.id_docs: 150 is larger than tasks.ioi.n_docs = 100" in out


def test_more_chunks_than_masks():
    out = config_error(set_key("search", "chunks", value=101))
    assert "config search.chunks: 101 is larger than the 100 masks of task ioi" in out


@pytest.mark.parametrize("change, message", [
    (set_key("search", "n_masks", value=17),
     "config search.n_masks: 17 is too small for group_testing on smollm2-135m (270 heads, groups of 16): it "
     "needs at least 18 "),
    (set_key("tasks", "ioi", "search", "n_masks", value=10),
     "config tasks.ioi.search.n_masks: 10 is too small for group_testing on smollm2-135m (270 heads, groups of 16)"),
    (set_key("search", "budgets", value=[5, 50]),
     "config search.budgets: 5 is too small for group_testing on smollm2-135m (270 heads, groups of 16): it needs "
     "at least 18 to score the unablated model and one partition of 17 groups; give every budget >= 18"),
    (lambda config: config.update(group_testing={"group_size": 8}, search={**config["search"], "n_masks": 34}),
     "config search.n_masks: 34 is too small for group_testing on smollm2-135m (270 heads, groups of 8): it needs "
     "at least 35 "),
    (lambda config: (config["validation"].update(top_k=2), config["search"].update(n_masks=5)),
     "config search.n_masks: 5 is too small for group_testing on smollm2-135m (270 heads, groups of 64): it needs "
     "at least 6 "),  # k = 2: groups of the power of two nearest 270 ln 2 / 4 = 47 (2^5.55)
])
def test_a_group_testing_cap_below_one_partition_names_the_least(change, message):
    assert message in config_error(change)


@pytest.mark.parametrize("top_k, n_masks", [(5, 18), (2, 6)])
def test_a_group_testing_cap_that_scores_one_partition_passes(top_k, n_masks):
    config = broken(lambda config: (config["validation"].update(top_k=top_k), config["search"].update(n_masks=n_masks)))
    check_workflow_config(config, SCHEMA)


def test_report_model_must_be_configured():
    out = config_error(set_key("report", "model", value="llama"))
    assert "config report.model: 'llama' is not a configured model; valid: smollm2-135m or null" in out


def test_greedy_main_method_cannot_wait_on_its_own_universal_heads():
    def change(config):
        config["search"]["methods"] = ["cs_stratified", "greedy"]
        config["validation"]["method"] = "greedy"
        config["universal"] = {"filter": True}
    out = config_error(change)
    assert "config validation.method: 'greedy' with universal.filter on would wait on itself" in out


# ---------------------------------------------------------------- no invented gold, no silent substitution

MASK_ONLY = ", ".join(name for name in methods.names()
                      if methods.get(name).scored and not methods.get(name).kind.gold)


def gradient_search_on(task: str, **spec):
    """The demo's ioi entry replaced by ``task`` (its own metric), searched by guided greedy and attribution."""
    def change(config):
        config["tasks"]["ioi"] = {"lm_eval_task": task, **spec}
        config["search"]["methods"] = ["guided_greedy", "attribution", "group_testing"]
    return change


@pytest.mark.parametrize("task, spec, reason", [
    ("headloc_swear", {"metric": "profane_words", "chat": True},
     "its doc_to_target is empty; and it decides correctness with process_results (a function), so its target "
     "need not be a correct answer"),
    ("headloc_rhyme", {"chat": True},
     "it decides correctness with process_results (a function), so its target need not be a correct answer"),
    ("headloc_gsm8k", {"metric": "exact_match,strict-match"},
     "its filter_list extracts or rewrites the answer (regex), so its target need not be what the model writes"),
])
def test_a_gradient_method_on_a_task_without_a_gold_continuation_names_the_mask_only_methods(task, spec, reason):
    """swear's target is empty, rhyme's 'gold' is the prompt's own word (not a rhyme), gsm8k's answer is
    extracted by a regex: none is a continuation to differentiate. Refused at parse, read from the YAML."""
    out = config_error(gradient_search_on(task, **spec))
    assert (f"config search.methods: guided_greedy, attribution differentiate a gold continuation's log-likelihood, "
            f"and task {task} ({REPO / 'src/headloc/tasks' / (task + '.yaml')}) has no gold continuation: {reason}; "
            f"expected methods that only score masks for it: {MASK_ONLY} (or, if its target is a correct answer its "
            "scoring accepts, declare metadata: {gold_target: true} in its YAML)") in out


def test_the_demo_with_its_default_method_passes_its_tasks_declare_their_targets_gold():
    """The demo's own config (screened greedy on ioi, capitals, induction): multiple choice has a gold
    choice; capitals and induction decide correctness with a function that accepts their target,
    and their YAMLs say so (metadata.gold_target)."""
    config = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    check_workflow_config(config, SCHEMA)


def test_a_head_name_spelled_with_leading_zeros_is_refused_naming_its_spelling():
    """Universal heads are compared with the rankings as text: L01H05 would never filter L1H5."""
    out = config_error(set_key("universal", "heads", value={"smollm2-135m": ["L1H4", "L01H05"]}))
    assert ("config universal.heads.smollm2-135m[1]: bad head name 'L01H05': write it 'L1H5' (L<layer>H<head>, "
            "zero-based, without leading zeros)") in out
    out = config_error(set_key("validation", "headsets", value=["L1H5+L02H0"]))
    assert "config validation.headsets[0]: bad head name 'L02H0': write it 'L2H0'" in out


def test_a_conditional_background_the_search_would_cap_is_refused():
    """With top_k 5 the search confirms at most 4 heads alone before going on beside them; 5 was
    capped to 4 while the search id said b5."""
    def change(config):
        config["search"]["methods"] = ["group_testing", "conditional_group_testing"]
        config["conditional_group_testing"] = {"background": 5}
    out = config_error(change)
    assert ("config conditional_group_testing.background: 5 is more than the search can confirm alone before going "
            "on beside them: validation.top_k 5 less the head found beside them, 4; expected 0..4 (or a larger "
            "validation.top_k)") in out
    config = broken(lambda config: change(config) or config["conditional_group_testing"].update(background=4))
    check_workflow_config(config, SCHEMA)


def test_search_keys_a_method_does_not_read_are_noted(capsys):
    """search.sparsity, alpha and chunks set for screened greedy (the demo's method, which draws no
    masks at a sparsity, fits no Lasso and scores in one job) are each said to be ignored, naming the
    methods that read them; with cs_stratified beside it, which reads all three, the note says so.
    thompson draws masks at a sparsity but fits no Lasso and scores in its one job. repeats: screened
    greedy draws its partition again, guided greedy draws nothing."""
    def change(config):
        config["search"].update(methods=["screened_greedy"], sparsity=0.1, alpha=0.01, chunks=3, repeats=2)
        config["validation"]["method"] = "screened_greedy"
    check_workflow_config(broken(change), SCHEMA)
    err = capsys.readouterr().err
    on = "on tasks ioi, capitals, induction"
    assert (f"note: config search.sparsity: 0.1 is ignored for screened_greedy {on}: it draws no masks at a sparsity "
            "(the methods that do: cs_stratified, cs_bernoulli, cs_adaptive, thompson)\n") in err
    assert (f"note: config search.alpha: 0.01 is ignored for screened_greedy {on}: it fits no Lasso (the methods "
            "that do: cs_stratified, cs_bernoulli, cs_adaptive)\n") in err
    assert (f"note: config search.chunks: 3 is ignored for screened_greedy {on}: it scores no masks in search.chunks "
            "jobs (the methods that do: cs_stratified, cs_bernoulli, cs_adaptive, greedy, greedy1s)\n") in err
    assert "search.repeats" not in err  # screened greedy draws its partition again per repeat

    def guided(config):  # guided greedy draws nothing at random
        config["search"].update(methods=["guided_greedy", "cs_stratified"], repeats=2)
        config["validation"]["method"] = "guided_greedy"
    check_workflow_config(broken(guided), SCHEMA)
    assert (f"note: config search.repeats: 2 is ignored for guided_greedy {on}: it draws nothing again per repeat "
            "(the methods that do: cs_stratified, cs_bernoulli, cs_adaptive, group_testing, conditional_group_testing, "
            "random, screened_greedy, thompson); cs_stratified reads it\n") in capsys.readouterr().err

    def beside(config):
        config["search"].update(methods=["screened_greedy", "cs_stratified", "thompson"], sparsity=0.1, alpha=0.01,
                                chunks=3)
        config["validation"]["method"] = "screened_greedy"
    check_workflow_config(broken(beside), SCHEMA)
    err = capsys.readouterr().err
    notes = {key: [line for line in err.splitlines() if f"search.{key}:" in line] for key in ("sparsity", "alpha",
                                                                                            "chunks")}
    assert notes["sparsity"] == [f"note: config search.sparsity: 0.1 is ignored for screened_greedy {on}: it draws no "
                                 "masks at a sparsity (the methods that do: cs_stratified, cs_bernoulli, cs_adaptive, "
                                 "thompson); cs_stratified, thompson read it"]
    for key, lack in (("alpha", "fit no Lasso"), ("chunks", "score no masks in search.chunks jobs")):
        assert len(notes[key]) == 1 and f"is ignored for screened_greedy, thompson {on}: they {lack} (" in notes[key][0]
        assert notes[key][0].endswith("; cs_stratified reads it"), key

    def own(config):  # a task's own sparsity is named as that task's key
        config["search"].update(methods=["screened_greedy"])
        config["tasks"]["ioi"]["search"] = {"sparsity": 0.2}
        config["validation"]["method"] = "screened_greedy"
    check_workflow_config(broken(own), SCHEMA)
    err = capsys.readouterr().err
    assert "note: config tasks.ioi.search.sparsity: 0.2 is ignored for screened_greedy on task ioi: it draws" in err
    assert "search.sparsity: 0.2 is ignored for screened_greedy on tasks" not in err


def test_a_one_document_identification_subset_is_refused():
    out = config_error(set_key("search", "id_docs", value=1))
    assert ("config search.id_docs: 1 document is too few to identify the heads of task ioi on: what ablating a "
            "head does to one document cannot be told from that document's quirks, and one document has no spread "
            "to measure noise by; expected at least 2 (the demo uses 20)") in out
    assert "config tasks.capitals.id_docs: 1 document is too few" in config_error(
        set_key("tasks", "capitals", "id_docs", value=1))


def test_budget_keys_a_method_ignores_and_a_small_subset_are_noted(capsys):
    """guided greedy spends no mask budget: n_masks and budgets set for it are said to be ignored
    (a note, not a refusal: the same config may name a method that spends them); a subset of a few
    documents is noted with its size. Keys left to the schema's defaults are not noted."""
    def change(config):
        config["search"].update(methods=["guided_greedy"], n_masks=3, budgets=[5000], id_docs=4)
        config["validation"]["method"] = "guided_greedy"
    check_workflow_config(broken(change), SCHEMA)
    err = capsys.readouterr().err
    budgeted = ", ".join(name for name in methods.names() if methods.get(name).budgeted)
    for key, value in (("n_masks", "3"), ("budgets", "[5000]")):
        assert (f"note: config search.{key}: {value} is ignored for guided_greedy on tasks ioi, capitals, induction: "
                f"it spends no mask budget (the budgeted methods: {budgeted})") in err
    assert ("note: config search.id_docs: the heads of task capitals are searched on 4 documents; heads found on so "
            "few may not carry the task on others (give 10 or more to rely on them; the demo uses 20)") in err

    def both(config):
        config["search"].update(methods=["guided_greedy", "group_testing"], budgets=[50])
        config["tasks"]["ioi"]["search"] = {"methods": ["group_testing"]}
    check_workflow_config(broken(both), SCHEMA)
    err = capsys.readouterr().err
    assert ("note: config search.budgets: [50] is ignored for guided_greedy on tasks capitals, induction: it spends "
            f"no mask budget (the budgeted methods: {budgeted}); group_testing spends it") in err
    assert "note: config search.n_masks: 100 is ignored for guided_greedy on tasks capitals, induction" in err
    assert "id_docs" not in err  # the demo's 20

    def defaults(config):  # n_masks left to the schema's default: nothing set, nothing noted
        config["search"].pop("n_masks", None)
        config["search"].update(methods=["guided_greedy"])
        config["validation"]["method"] = "guided_greedy"
    check_workflow_config(broken(defaults), SCHEMA)
    assert "is ignored" not in capsys.readouterr().err
