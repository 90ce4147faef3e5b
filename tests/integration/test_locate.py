"""headloc.locate and `python -m headloc locate` (issue 34): docs/library.md's walkthrough run as
written on the planted model, the command on a tiny random Llama and an lm-eval task, and the
errors bad input must raise. That locate gives the workflow's ranking is checked against a
workflow run in tests/workflow/test_methods.py (test_locate_matches_the_workflow)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import headloc
from planted import PLANTED, planted_dir, planted_model

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "docs" / "library.md"
PLANTED_HEAD = "L{}H{}".format(*PLANTED)


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
    assert found.search == "cs_stratified_m16_p0.25_s0" and found.n_evals == 16
    # Delta Task recomputed here: accuracy of the walkthrough's task with the planted head zeroed
    rows = namespace["rows"]
    model = planted_model()
    accuracy = namespace["repeat_first"](model)
    from conftest import zeroed_copy
    mask = np.zeros(8, dtype=int)
    mask[PLANTED[0] * 4 + PLANTED[1]] = 1
    ablated = namespace["repeat_first"](zeroed_copy(model, mask))
    assert namespace["check"].delta_task == pytest.approx(100 * (ablated - accuracy))
    assert namespace["check"].delta_task < -50 and len(rows) == 64
    saved = tmp_path / "planted-search"
    record = json.loads((saved / "recovery.json").read_text())
    assert record["ranking"] == found.ranking and record["coef"] == pytest.approx(found.values)
    for name in ("heatmap.png", "masks.npy", "masks.tsv", "heads.csv"):
        assert (saved / name).is_file(), name
    table = pd.read_csv(saved / "heads.csv")
    assert table.loc[table["rank"] == 1, "head"].tolist() == [PLANTED_HEAD]
    mib = json.loads(next((saved / "mib").rglob("importances.json")).read_text())
    assert max((n for n in mib["nodes"] if n.startswith("a")), key=lambda n: mib["nodes"][n]["score"]) == "a1.h2"


def test_a_callable_task_gets_the_scores_a_plain_ablation_gives(tmp_path):
    """greedy1s on a callable: each head's value is the score with that head's output columns zeroed
    (conftest.zeroed_copy, not headloc's hooks) minus the unablated score."""
    from conftest import zeroed_copy

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
    ({"budget": 0}, "budget must be a positive number of masks for cs_stratified, got 0"),
    ({"top_k": 0}, "top_k must be a positive integer, got 0"),
    ({"sparsity": 1.5}, "sparsity must lie in (0, 1), got 1.5"),
    ({"alpha": "auto"}, "alpha must be 'cv' or a number >= 0, got 'auto'"),
    ({"method": "attribution"}, "method 'attribution' differentiates the gold continuations"),
    ({"documents": 5}, "documents= and metric= apply to an lm-eval task"),
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
])
def test_bad_tasks_are_refused_by_name(task, kwargs, message):
    with pytest.raises(ValueError) as error:
        headloc.locate(planted_model(), None, task, progress=False, **kwargs)
    assert message in str(error.value)


def test_help_documents_every_option():
    from headloc.api.cli import parser

    result = subprocess.run([sys.executable, "-m", "headloc", "locate", "--help"], capture_output=True,
                            text=True, check=True)
    (locate,) = [a for a in parser()._actions if a.dest == "command"][0].choices.values()
    options = [s for action in locate._actions for s in action.option_strings if s.startswith("--")]
    assert len(options) >= 18
    for option in options:
        assert option in result.stdout, option
    assert all(name in result.stdout for name in headloc.methods.names())


def test_the_command_prints_the_top_k_and_writes_the_folder(tmp_path, tiny_model_dir):
    """On a tiny random Llama and headloc_ioi's first 4 documents: the printed top 2 is
    recovery.json's, whose one-shot values are the masks' scores read back from masks.tsv."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [sys.executable, "-m", "headloc", "locate", "--model", str(tiny_model_dir), "--task", "headloc_ioi",
               "--method", "greedy1s", "--top-k", "2", "--documents", "4", "--batch-size", "8",
               "--out", str(tmp_path / "found"), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "found" / "recovery.json").read_text())
    assert record["search"] == "greedy1s_n4_s0" and record["task"] == "headloc_ioi"
    scores = pd.read_csv(tmp_path / "found" / "masks.tsv", sep="\t")["score"].to_numpy()
    heads = [f"L{i // 4}H{i % 4}" for i in range(8)]
    assert record["coef"] == pytest.approx({h: scores[1 + i] - scores[0] for i, h in enumerate(heads)})
    printed = re.findall(r"^\s+(\d)\s+(L\dH\d)\s", result.stdout, flags=re.M)
    assert printed == [("1", record["ranking"][0]), ("2", record["ranking"][1])]
    assert f"wrote {tmp_path / 'found'}" in result.stdout
    frame = pd.read_csv(tmp_path / "found" / "heads.csv")
    assert list(frame.columns) == ["model", "task", "search", "head", "layer", "index", "value", "rank"]


def test_the_command_names_a_model_it_cannot_load(tmp_path, capsys):
    from headloc.api.cli import main

    assert main(["locate", "--model", str(tmp_path / "nothing"), "--task", "headloc_ioi"]) == 2
    assert f"cannot load model {str(tmp_path / 'nothing')!r}" in capsys.readouterr().err


def test_tasks_are_found_as_the_workflow_finds_them(tmp_path):
    """A name in headloc's tasks or an include folder, or a YAML path (its folder searched too);
    the default metric is the first the YAML reports (a process_results task: its metric_list)."""
    from headloc.api.tasks import resolve_task
    from headloc.data import TASKS_DIR

    assert resolve_task("headloc_ioi").spec.metric_key == "acc,none"
    by_path = resolve_task(str(TASKS_DIR / "headloc_ioi_margin.yaml"), documents=3)
    assert (by_path.name, by_path.spec.metric_key, by_path.spec.doc_ids) == ("headloc_ioi_margin", "margin,none",
                                                                            (0, 1, 2))
    assert by_path.folders[:2] == [TASKS_DIR, TASKS_DIR.resolve()]
    (tmp_path / "mine.yaml").write_text("task: my_copy\noutput_type: multiple_choice\ndataset_path: json\n"
                                        "doc_to_text: text\ndoc_to_target: label\ndoc_to_choice: choices\n"
                                        "metric_list:\n  - metric: acc_norm\n")
    mine = resolve_task("my_copy", include_path=[tmp_path])
    assert mine.spec.metric_key == "acc_norm,none" and mine.folders == [TASKS_DIR, tmp_path.resolve()]
