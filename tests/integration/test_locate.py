"""headloc.locate: docs/library.md's walkthrough run as written on the planted model, what a notebook
sees (the model's mode, nothing printed with progress=False, a short repr and an HTML one),
validate() in each metric's own unit, and the errors bad input must raise before any work. The
command `python -m headloc locate` is tests/integration/test_cli.py's. That locate gives the
workflow's ranking is checked against a workflow run in tests/workflow/test_methods.py
(test_locate_matches_the_workflow)."""

from __future__ import annotations

import base64
import io
import json
import logging
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from PIL import Image

import headloc
from headloc import methods
from conftest import tiny_llama, zeroed_copy
from planted import PLANTED, planted_dir, planted_model

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "docs" / "library.md"
PLANTED_HEAD = "L{}H{}".format(*PLANTED)
HEADS = [f"L{i // 4}H{i % 4}" for i in range(8)]  # the tiny models' heads, in mask order


def walkthrough_blocks() -> list[str]:
    """The python blocks between docs/library.md's walkthrough markers, in order."""
    text = LIBRARY.read_text()
    section = text.split("<!-- walkthrough -->")[1].split("<!-- /walkthrough -->")[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_walkthrough_runs_as_written_and_finds_the_planted_head(tmp_path, monkeypatch):
    (tmp_path / "planted-model").symlink_to(planted_dir())
    monkeypatch.chdir(tmp_path)
    blocks = walkthrough_blocks()
    assert len(blocks) >= 4  # load, locate, heatmap, validate, export
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(LIBRARY), "exec"), namespace)
    found = namespace["found"]
    assert found.ranking[0] == PLANTED_HEAD
    assert found.search_id == "cs_stratified_m16_p0.25_s0" and found.n_evals == 16
    # Delta Task recomputed here: accuracy of the walkthrough's task with the planted head zeroed
    rows = namespace["rows"]
    model = planted_model()
    accuracy = namespace["repeat_first"](model)
    mask = np.zeros(8, dtype=int)
    mask[PLANTED[0] * 4 + PLANTED[1]] = 1
    ablated = namespace["repeat_first"](zeroed_copy(model, mask))
    assert namespace["check"].delta_task == pytest.approx(100 * (ablated - accuracy))
    assert namespace["check"].delta_task < -50 and len(rows) == 64
    saved = tmp_path / "planted-search"
    record = json.loads((saved / "recovery.json").read_text())
    assert record["ranking"] == found.ranking and record["coef"] == pytest.approx(found.values)
    for name in ("heatmap.png", "masks.npy", "scores/0.tsv", "heads.csv"):
        assert (saved / name).is_file(), name
    table = pd.read_csv(saved / "heads.csv")
    assert table.loc[table["rank"] == 1, "head"].tolist() == [PLANTED_HEAD]
    mib = json.loads(next((saved / "mib").rglob("importances.json")).read_text())
    assert max((n for n in mib["nodes"] if n.startswith("a")), key=lambda n: mib["nodes"][n]["score"]) == "a1.h2"


def test_the_manuals_offline_model_loads_as_written(tmp_path, monkeypatch, smollm2_dir, tokenizer):
    """docs/library.md's recipe for the embedded model, run as written in a folder where the
    conversion is done (its convert_gguf call is the one conftest's smollm2_dir makes): SmolLM2's
    30 layers x 9 heads with their language-model head, in eval() mode, and its tokenizer."""
    from headloc.api.checks import check_model
    from headloc.heads import HeadGeometry

    text = LIBRARY.read_text()
    section = text.split("<!-- embedded-model -->")[1].split("<!-- /embedded-model -->")[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (tmp_path / "smollm2-135m-instruct").symlink_to(smollm2_dir)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, str(LIBRARY), "exec"), namespace)
    model, loaded = namespace["model"], namespace["tokenizer"]
    geometry = HeadGeometry.of(model.config)
    assert (geometry.n_layers, geometry.n_heads) == (30, 9) and not model.training
    assert loaded("The cat").input_ids == tokenizer("The cat").input_ids and loaded.chat_template
    check_model(model, loaded, "headloc_ioi_margin")  # what locate checks first: nothing refused


def test_a_callable_task_gets_the_scores_a_plain_ablation_gives(tmp_path):
    """greedy1s on a callable: each head's value is the score with that head's output columns zeroed
    (conftest.zeroed_copy, not headloc's hooks) minus the unablated score."""

    import torch

    model = planted_model()
    rows = torch.randint(3, 24, (32, 6), generator=torch.Generator().manual_seed(5))

    def logprob(m):
        with torch.no_grad():
            logits = m(rows).logits[:, -1].log_softmax(-1)
        return float(logits.gather(1, rows[:, :1]).mean())

    found = headloc.locate(model, None, logprob, method="greedy1s", top_k=2, progress=False)
    clean = logprob(model)
    for index in range(8):
        mask = np.zeros(8, dtype=int)
        mask[index] = 1
        head = f"L{index // 4}H{index % 4}"
        assert found.values[head] == pytest.approx(logprob(zeroed_copy(model, mask)) - clean, abs=1e-5)
    assert found.ranking[0] == PLANTED_HEAD and found.n_evals == 9


def test_a_lower_is_better_score_gets_the_same_heads_once_declared():
    """A loss (the negated log-probability) with higher_is_better=False ranks as the log-probability;
    read as higher-is-better it would put the planted head last."""
    import torch

    model = planted_model()
    rows = torch.randint(3, 24, (32, 6), generator=torch.Generator().manual_seed(5))

    def loss(m):
        with torch.no_grad():
            logits = m(rows).logits[:, -1].log_softmax(-1)
        return -float(logits.gather(1, rows[:, :1]).mean())

    declared = headloc.locate(model, None, loss, method="greedy1s", top_k=2, higher_is_better=False, progress=False)
    assumed = headloc.locate(model, None, loss, method="greedy1s", top_k=2, progress=False)
    assert declared.ranking[0] == PLANTED_HEAD and declared.record["higher_is_better"] is False
    assert assumed.ranking[-1] == PLANTED_HEAD


def test_an_lm_eval_tasks_direction_is_read_never_contradicted():
    from headloc.api.tasks import resolve_task

    assert resolve_task("headloc_ioi").higher_is_better is True
    with pytest.raises(ValueError, match="declares higher_is_better=True for 'acc'; higher_is_better=False contradicts it"):
        resolve_task("headloc_ioi", higher_is_better=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "lasso"}, "unknown search method 'lasso'; known: attribution"),
    ({"method": "greedy", "budget": 10}, "method 'greedy' spends no mask budget (budget=10)"),
    ({"method": "cs_stratified", "budget": 0}, "budget 0 is too small for cs_stratified: it needs at least 2 masks"),
    ({"method": "cs_stratified", "budget": 2.5}, "budget must be a whole number of masks for cs_stratified, got 2.5"),
    ({"budget": 10}, "method 'screened_greedy' spends no mask budget (budget=10)"),  # the default method
    ({}, "method 'screened_greedy' differentiates the gold continuations of an lm-eval task; a callable task has none. "
         "Use an lm-eval task, or one of cs_stratified"),
    ({"method": "group_testing", "options": {"extra_head": 3}},
     "method 'group_testing' has no option 'extra_head'; its options are group_size (default 'auto'), "
     "masks_per_round (default 1), extra_heads (default 2)"),
    ({"method": "cs_stratified", "options": {"steps": 3}}, "method 'cs_stratified' takes no options, got {'steps': 3}; the methods with "
                                "options are chg, group_testing, conditional_group_testing, guided_greedy, screened_greedy, thompson"),
    ({"method": "guided_greedy", "options": {"m": 0, "m_abs": 0}},
     "guided_greedy.m and guided_greedy.m_abs: both 0 is not valid; expected at least one of them >= 1"),
    ({"method": "group_testing", "options": {"extra_heads": -1}},
     "group_testing.extra_heads: -1 is not valid; expected an integer >= 0"),
    ({"top_k": 0}, "top_k: 0 is not valid; expected an integer >= 1"),
    ({"seed": -1}, "seed: -1 is not valid; expected an integer >= 0"),
    ({"sparsity": 1.5}, "sparsity: 1.5 is not valid; expected a number in (0, 1)"),
    ({"alpha": "auto"}, "alpha: 'auto' is not valid; expected a number >= 0 or one of: cv"),
    ({"method": "attribution"}, "method 'attribution' differentiates the gold continuations"),
    ({"documents": 5}, "documents= and metric= apply to an lm-eval task"),
    ({"method": "conditional_group_testing", "options": {"background": 5}},  # was capped to 4, the id saying b5
     "options['background'] of conditional_group_testing: 5 is more than the search can confirm alone before going "
     "on beside them: top_k 5 less the head found beside them, 4; expected 0..4 (or a larger top_k)"),
])
def test_bad_arguments_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError) as error:
        headloc.locate(planted_model(), None, lambda m: 0.0, progress=False, **kwargs)
    assert message in str(error.value)


@pytest.mark.parametrize("task, kwargs, message", [
    ("missing/task.yaml", {}, "task YAML 'missing/task.yaml' does not exist"),
    ("headloc_ioi", {"include_path": ["no/such/folder"]}, "include_path 'no/such/folder' is not a directory"),
    ("headloc_ioi", {"documents": "no/such.jsonl"}, "documents file 'no/such.jsonl' does not exist"),
    ("headloc_ioi", {"documents": [1, -2]}, "documents=[1, -2]: expected None, a number, a file"),
    ("headloc_ioi", {}, "lm-eval task 'headloc_ioi' needs the model's tokenizer; got tokenizer=None"),
    ("headloc_ioi", {"documents": 1}, "documents: 1 document to search task 'headloc_ioi' on; expected at least 2"),
    ("headloc_ioi", {"documents": [7]}, "documents: 1 document to search task 'headloc_ioi' on; expected at least 2"),
    # the default method, screened greedy, differentiates a gold continuation: these tasks have none
    ("headloc_rhyme", {"chat": True},
     "method screened_greedy differentiates a gold continuation's log-likelihood, and task headloc_rhyme ("),
    ("headloc_swear", {"chat": True}, "has no gold continuation: its doc_to_target is empty; and it decides "
                                      "correctness with process_results (a function)"),
])
def test_bad_tasks_are_refused_by_name(task, kwargs, message, tokenizer):
    with pytest.raises(ValueError) as error:
        headloc.locate(planted_model(), None if "tokenizer" in message else tokenizer, task, progress=False, **kwargs)
    assert message in str(error.value)


def test_a_gradient_method_names_the_mask_only_methods_where_a_task_has_no_gold(tokenizer):
    with pytest.raises(ValueError) as error:
        headloc.locate(planted_model(), tokenizer, "headloc_rhyme", method="attribution", chat=True, progress=False)
    mask_only = ", ".join(name for name in methods.names() if methods.get(name).scored and not methods.get(name).kind.gold)
    assert (f"has no gold continuation: it decides correctness with process_results (a function), so its target need "
            f"not be a correct answer; expected methods that only score masks for it: {mask_only} (or, if its target "
            "is a correct answer its scoring accepts, declare metadata: {gold_target: true} in its YAML)"
            ) in str(error.value)


def test_an_empty_gold_target_in_a_users_documents_is_refused_naming_the_document(tmp_path, tokenizer):
    """A capital left empty in a JSONL of documents: its gold continuation would be the delimiter
    alone (a space), differentiated as if it were the answer."""
    docs = [{"id": "a", "country": "France", "capital": "Paris", "answers": ["Paris"]},
            {"id": "b", "country": "Peru", "capital": "", "answers": [""]},
            {"id": "c", "country": "Chile", "capital": "Santiago", "answers": ["Santiago"]}]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    with pytest.raises(ValueError) as error:
        headloc.locate(tiny_llama(len(tokenizer)), tokenizer, "headloc_capitals", method="attribution",
                       documents=str(tmp_path / "docs.jsonl"), progress=False)
    message = str(error.value)
    assert message.startswith("document 1 of headloc_capitals ({'id': 'b', 'country': 'Peru', 'capital': ''")
    assert message.endswith("its target (doc_to_target) is empty (''); a gradient method differentiates the gold "
                            "continuation, so every document needs a non-empty target")


def test_tasks_are_found_as_the_workflow_finds_them(tmp_path):
    """A name in headloc's tasks or an include folder, or a YAML path (its folder searched too);
    the default metric is the first the YAML reports (a process_results task: its metric_list)."""
    from headloc.api.tasks import resolve_task
    from headloc.data import TASKS_DIR

    assert resolve_task("headloc_ioi").spec.metric_key == "acc,none"
    by_path = resolve_task(str(TASKS_DIR / "headloc_ioi_margin.yaml"), documents=3)
    assert (by_path.name, by_path.spec.metric_key, by_path.spec.doc_ids) == ("headloc_ioi_margin", "margin,none",
                                                                            (0, 1, 2))
    assert by_path.task_folders[:2] == [TASKS_DIR, TASKS_DIR.resolve()]
    (tmp_path / "mine.yaml").write_text("task: my_copy\noutput_type: multiple_choice\ndataset_path: json\n"
                                        "doc_to_text: text\ndoc_to_target: label\ndoc_to_choice: choices\n"
                                        "metric_list:\n  - metric: acc_norm\n")
    mine = resolve_task("my_copy", include_path=[tmp_path])
    assert mine.spec.metric_key == "acc_norm,none" and mine.task_folders == [TASKS_DIR, tmp_path.resolve()]


# ------------------------------------------------------------------ errors before any work

# group testing on the planted model's 8 heads with top_k 1: groups of 2 (8 ln 2 / 2 = 2.8: log2 1.47
# rounds to 1), the baseline and 4 groups
LEAST_BUDGET = {"cs_stratified": 2, "cs_bernoulli": 2, "cs_adaptive": 3, "group_testing": 5,
                "conditional_group_testing": 5, "thompson": 2}


@pytest.mark.parametrize("method", [m for m in methods.names() if methods.get(m).budgeted])
def test_a_budget_below_the_methods_least_is_refused_before_any_work(method):
    """Read from the searches: a Lasso needs 2 masks (one mask's score is all intercept; the
    cross-validated penalty needs two folds), cs_adaptive 2 in its first stage and 1 in its second, a
    sequential search its unablated row and one mask, group testing its unablated row and one whole
    partition. One mask fewer is refused with nothing scored; the least runs."""
    least = LEAST_BUDGET[method]
    # top_k 1 leaves conditional group testing no head to confirm alone first: its background is 0
    options = {"background": 0} if method == "conditional_group_testing" else None
    calls = []

    def task(model):
        calls.append(1)
        return 0.5

    with pytest.raises(ValueError) as error:
        headloc.locate(planted_model(), None, task, method=method, budget=least - 1, sparsity=0.25, top_k=1,
                       options=options, progress=False)
    assert f"budget {least - 1} is too small for {method}" in str(error.value)
    assert f"it needs at least {least} masks (" in str(error.value)
    assert calls == []
    found = headloc.locate(planted_model(), None, task, method=method, budget=least, sparsity=0.25, top_k=1,
                           options=options, progress=False)
    assert 1 <= found.n_evals <= least and len(calls) == found.n_evals


def test_a_sparsity_or_penalty_the_method_ignores_is_a_warning_in_the_result(tmp_path):
    """group testing draws no masks at a sparsity and fits no Lasso: both given other than their
    defaults are said to be ignored, in the result's warnings and in the recovery.json it saves;
    cs_stratified reads both and has no such warning, nor has group testing at the defaults."""
    def task(model):
        return 0.5

    found = headloc.locate(planted_model(), None, task, method="group_testing", budget=8, sparsity=0.25, alpha=0.01,
                           top_k=1, progress=False)
    assert [w for w in found.warnings if "is ignored" in w] == [
        "sparsity=0.25 is ignored: group_testing draws no masks at a sparsity (the methods that read sparsity: "
        "cs_stratified, cs_bernoulli, cs_adaptive, thompson)",
        "alpha=0.01 is ignored: group_testing fits no Lasso (the methods that read alpha: cs_stratified, "
        "cs_bernoulli, cs_adaptive)"]
    saved = json.loads((found.save(tmp_path / "gt") / "recovery.json").read_text())
    assert [w for w in saved["warnings"] if "is ignored" in w] == [w for w in found.warnings if "is ignored" in w]
    for method, kwargs in (("cs_stratified", {"sparsity": 0.25, "alpha": 0.01}), ("group_testing", {})):
        found = headloc.locate(planted_model(), None, task, method=method, budget=8, top_k=1, progress=False, **kwargs)
        assert not [w for w in found.warnings if "is ignored" in w], method


def gpt2_without_head(vocab_size: int):
    from transformers import GPT2Config, GPT2Model

    return GPT2Model(GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=vocab_size)).eval()


@pytest.mark.parametrize("swap, message", [
    ("no_head", "model GPT2Model has no language-model head (get_output_embeddings() is None), but an lm-eval "
                "task scores next-token logits: load it with AutoModelForCausalLM (e.g. GPT2LMHeadModel, not "
                "GPT2Model)"),
    ("tokenizer_first", "model is a tokenizer ({tokenizer}); pass the model first, then its tokenizer"),
    ("model_twice", "tokenizer is a model (LlamaForCausalLM); pass the model first, then its tokenizer"),
    ("not_a_tokenizer", "tokenizer must be a transformers tokenizer (AutoTokenizer.from_pretrained), got str"),
    ("not_a_model", "model must be a loaded transformers model (a torch module with a config), got str"),
])
def test_the_wrong_model_or_tokenizer_is_refused_by_name(swap, message, tokenizer):
    """Refused before the task is even looked up (the task name does not exist)."""
    model = tiny_llama(len(tokenizer))
    arguments = {"no_head": (gpt2_without_head(len(tokenizer)), tokenizer), "tokenizer_first": (tokenizer, model),
                 "model_twice": (model, model), "not_a_tokenizer": (model, "HuggingFaceTB/SmolLM2-135M"),
                 "not_a_model": ("HuggingFaceTB/SmolLM2-135M", tokenizer)}[swap]
    with pytest.raises(TypeError) as error:
        headloc.locate(*arguments, "no_such_task", progress=False)
    assert message.format(tokenizer=type(tokenizer).__name__) in str(error.value)


# ------------------------------------------------------------------ in a notebook

def test_the_model_comes_back_in_the_mode_it_came_in(tokenizer):
    """A model in train() mode (one layer in eval()) is searched and validated in eval() mode (lm-eval's
    wrapper and a callable see no module training) and comes back with every module as it was."""
    model = tiny_llama(len(tokenizer)).train()
    model.model.layers[0].eval()
    before = {name: module.training for name, module in model.named_modules()}
    assert any(before.values()) and not all(before.values())
    found = headloc.locate(model, tokenizer, "headloc_ioi", method="greedy1s", top_k=1, documents=2,
                           batch_size=8, progress=False)
    assert {name: module.training for name, module in model.named_modules()} == before
    found.validate(documents=2, progress=False)
    assert {name: module.training for name, module in model.named_modules()} == before
    seen = []

    def task(m):
        seen.append(any(module.training for module in m.modules()))
        return 0.5

    headloc.locate(model, None, task, method="greedy1s", top_k=1, progress=False).validate(progress=False)
    assert seen and not any(seen)
    assert {name: module.training for name, module in model.named_modules()} == before


def test_a_budgeted_method_without_a_budget_spends_the_workflows_and_its_bar_counts_out_of_it(capfd):
    """budget=None is config/schema.yaml's search.n_masks (100), recorded in the parameters, spent
    whole by a mask design, and the one progress bar counts the masks out of it."""
    from headloc.workflow.schema import load_schema

    schema = load_schema(REPO / "config" / "schema.yaml")
    n_masks = schema["properties"]["search"]["properties"]["n_masks"]["default"]
    found = headloc.locate(planted_model(), None, repeat_first_row, method="cs_stratified", top_k=2)
    assert found.parameters["budget"] == n_masks and found.n_evals == n_masks
    err = capfd.readouterr().err
    assert "cs_stratified masks: 100%" in err and f"{n_masks}/{n_masks}" in err, err[-500:]


def test_progress_false_prints_nothing_and_progress_true_draws_headlocs_bars_only(tokenizer, capfd, caplog):
    """Nothing on stdout or stderr and no lm-eval log message from a quiet search and validation on an
    lm-eval task (lm-eval warns at each task build and model wrap, and draws its own bars); with
    progress, a search draws its one bar and a validation its own, lm-eval still silent; afterwards
    lm-eval's logger is as it was."""
    caplog.set_level(logging.WARNING)
    level = logging.getLogger("lm_eval").level
    model = tiny_llama(len(tokenizer))
    found = headloc.locate(model, tokenizer, "headloc_ioi", method="greedy1s", top_k=1, documents=2,
                           batch_size=8, progress=False)
    found.validate(tasks=["headloc_induction"], documents={"headloc_ioi": 2, "headloc_induction": 2},
                   progress=False)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("lm_eval")] == []
    headloc.locate(model, tokenizer, "headloc_ioi", method="greedy1s", top_k=1, documents=2, batch_size=8)
    found.validate(documents=2, progress=True)
    err = capfd.readouterr().err
    bars = {line.split(":")[0] for line in re.split(r"[\r\n]", err) if line.strip()}
    assert bars == {"greedy1s masks", "validate headloc_ioi"}, bars
    assert [r.getMessage() for r in caplog.records if r.name.startswith("lm_eval")] == []
    assert logging.getLogger("lm_eval").level == level


class _Page(HTMLParser):
    """The text and the images of an HTML fragment."""

    def __init__(self):
        super().__init__()
        self.text, self.images = [], []

    def handle_data(self, data):
        self.text.append(data)

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])


def test_the_repr_is_short_and_the_html_shows_the_heatmap(caplog, monkeypatch):
    """The repr: method, task, evaluations, the top heads with their values, what they mean and the
    record's warnings, in a few lines. The HTML: the same and the heatmap as an inline PNG. A warning
    of the record (as group testing writes them) is logged at the end of locate."""
    from headloc.api import locator

    drive = locator.drive
    warning = "group testing stopped at its cap before confirming its top 5 <&>"
    monkeypatch.setattr(locator, "drive", lambda *a, **k: {**drive(*a, **k), "warnings": [warning]})
    caplog.set_level(logging.WARNING, logger="headloc.locate")
    found = headloc.locate(planted_model(), None, repeat_first_row, method="greedy1s", top_k=3, progress=False)
    # a callable's one number per set has no documents to resample: said, and not as "no head found"
    assert [r.getMessage() for r in caplog.records if r.name == "headloc.locate"] == [
        "heads not assessed: the scores are not means over documents (a callable task's one number, or an "
        "aggregate metric), so they cannot be resampled", f"greedy1s_s0 on repeat_first_row: {warning}"]
    text = repr(found)
    assert len(text) < 600 and len(text.splitlines()) <= 5, text
    top = [f"{head} {found.values[head]:.4g}" for head in found.ranking[:3]]
    assert found.ranking[0] == PLANTED_HEAD and f"top 3: {', '.join(top)}" in text
    for fact in ("greedy1s on repeat_first_row", "9 evaluations", "value: score change when ablated alone",
                 f"warning: {warning}"):
        assert fact in text, fact
    page = _Page()
    page.feed(found._repr_html_())
    shown = "".join(page.text)
    for fact in ("greedy1s on repeat_first_row", "9 evaluations", PLANTED_HEAD, f"{found.values[PLANTED_HEAD]:.4g}",
                 "score change when ablated alone", warning):
        assert fact in shown, fact
    (source,) = page.images
    assert source.startswith("data:image/png;base64,")
    image = Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1])))
    figure = found.heatmap()
    assert image.format == "PNG" and image.size == tuple(round(x) for x in figure.get_size_inches() * figure.dpi)


def repeat_first_row(model):
    """Share of the planted model's rows whose first token it predicts after the row."""
    import torch

    rows = torch.randint(3, 24, (32, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        predicted = model(rows).logits[:, -1].argmax(-1)
    return float((predicted == rows[:, 0]).float().mean())


def test_a_long_top_k_keeps_the_repr_short():
    found = headloc.locate(planted_model(), None, repeat_first_row, method="greedy1s", top_k=8, progress=False)
    text = repr(found)
    assert len(text) < 1000 and "... 0 more" not in text and all(head in text for head in found.ranking)
    found.record["top_heads"] = found.ranking * 20  # as a model of 160 heads with top_k=160 would
    text = repr(found)
    assert len(text) < 1000 and "... 150 more" in text


# ------------------------------------------------------------------ validate in each metric's unit

PPL_TASK = """\
task: ppl_mine
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
metadata:
  version: 1.0
"""
PPL_DOCS = ["The cat sat on the mat and looked at the door.", "Rain fell on the old town all night long."]


def word_perplexity(model, tokenizer) -> float:
    """lm-eval's word perplexity of PPL_DOCS, computed here: exp(-(summed log-likelihood of each
    document's tokens after the tokenizer's BOS token) / (its words))."""
    import torch

    total, words = 0.0, 0
    for text in PPL_DOCS:
        ids = tokenizer(text, add_special_tokens=False).input_ids
        with torch.no_grad():
            logprobs = model(torch.tensor([[tokenizer.bos_token_id, *ids]])).logits[0, :-1].log_softmax(-1)
        total += float(logprobs[torch.arange(len(ids)), torch.tensor(ids)].sum())
        words += len(text.split())
    return math.exp(-total / words)


@pytest.fixture(scope="module")
def perplexity_search(tmp_path_factory, tokenizer):
    """One-shot greedy on a word-perplexity task of one's own (lower is better) on a tiny random Llama."""
    folder = tmp_path_factory.mktemp("ppl")
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in PPL_DOCS))
    (folder / "ppl.yaml").write_text(PPL_TASK.format(docs=folder / "docs.jsonl"))
    model = tiny_llama(len(tokenizer), seed=3)
    found = headloc.locate(model, tokenizer, "ppl_mine", include_path=[folder], method="greedy1s", top_k=2,
                           batch_size=8, progress=False)
    return found, model, tokenizer


def test_a_task_whose_documents_the_datasets_library_loads_prints_nothing_either(tmp_path, tokenizer, capfd):
    """A task YAML with a dataset_path: lm-eval loads its documents with the datasets library, whose
    own bar ('Generating test split', on first loading a file) stays off with progress=False."""
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in PPL_DOCS))
    (tmp_path / "ppl.yaml").write_text(PPL_TASK.format(docs=tmp_path / "docs.jsonl"))
    found = headloc.locate(tiny_llama(len(tokenizer)), tokenizer, str(tmp_path / "ppl.yaml"), method="greedy1s",
                           top_k=1, batch_size=8, progress=False)
    found.validate(progress=False)
    assert capfd.readouterr() == ("", "")


def test_validate_shows_a_perplexity_in_its_own_unit_and_a_rise_as_damage(perplexity_search):
    """Delta Task is minus the perplexity's rise as computed here from the model with its top heads
    zeroed (not 100 x it; signed as Table 2, negative = damage), and so is Delta Gen over the same
    task again; an
    accuracy task is in percentage points, a task named relative in percent of its unablated score."""
    found, model, tokenizer = perplexity_search
    mask = np.zeros(8, dtype=int)
    mask[[HEADS.index(head) for head in found.ranking[:2]]] = 1
    clean, ablated = word_perplexity(model, tokenizer), word_perplexity(zeroed_copy(model, mask), tokenizer)
    assert clean > 100 and ablated > clean  # the top heads are those whose ablation raises perplexity
    check = found.validate(tasks={"again": "ppl_mine", "ioi": "headloc_ioi"}, documents={"ioi": 4}, progress=False)
    assert check.delta_task == pytest.approx(-(ablated - clean), rel=1e-4)  # as Table 2: negative is damage
    rows = check.scores.set_index("task")
    assert rows.loc["ppl_mine", "delta"] == pytest.approx(ablated - clean, rel=1e-4)  # the change as measured
    assert rows.loc["ppl_mine", "clean"] == pytest.approx(clean, rel=1e-5)
    assert rows["unit"].to_dict() == {"ppl_mine": "own", "again": "own", "ioi": "points"}
    ioi = rows.loc["ioi"]
    assert ioi["delta"] == pytest.approx(100 * (ioi["ablated"] - ioi["clean"]))
    assert check.delta_gen == pytest.approx((-(ablated - clean) + ioi["delta"]) / 2, rel=1e-4)
    text = repr(check)
    assert f"Delta Task {clean - ablated:+,.1f} word_perplexity (signed so that negative is damage)" in text
    assert f"{ablated - clean:+,.1f} word_perplexity (lower is better: a rise is damage)" in text
    relative = found.validate(units={"ppl_mine": "relative"}, progress=False)
    assert relative.delta_task == pytest.approx(-100 * (ablated / clean - 1), rel=1e-4)
    assert "% of the unablated word_perplexity" in repr(relative)


def test_a_lower_is_better_search_says_a_rise_is_damage(perplexity_search):
    """The values are changes of the negated perplexity (the searches rank by it): the label and the
    repr say so instead of a bare 'score change when ablated -431.6'."""
    found, _, _ = perplexity_search
    assert found.values[found.ranking[0]] < 0
    expected = ("score change when ablated alone, of -word_perplexity (word_perplexity is lower-is-better: a rise "
                "is damage, and shows here as a negative change)")
    assert found.label == expected and f"value: {expected}" in repr(found)


def test_bad_units_are_refused_by_name(perplexity_search):
    found, _, _ = perplexity_search
    with pytest.raises(ValueError, match="units names task 'ioi', which is not validated; the tasks are ppl_mine"):
        found.validate(units={"ioi": "points"}, progress=False)
    with pytest.raises(ValueError, match=r"units\['ppl_mine'\] is 'percent'; expected one of points, relative, own"):
        found.validate(units={"ppl_mine": "percent"}, progress=False)
    with pytest.raises(ValueError, match="task 'ppl_mine': score .* is not a fraction in"):
        found.validate(units={"ppl_mine": "points"}, progress=False)
