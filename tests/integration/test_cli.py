"""`python -m headloc locate`: its help, a search on a tiny random Llama and an lm-eval task, method
options and ``--batch-size auto``, and the errors it prints (exit status 2) before any work."""

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
from headloc import methods
from headloc.api.cli import main, parser

BUDGETED = [name for name in methods.names() if methods.get(name).budgeted]


def locate_help() -> dict[str, str]:
    """The locate command's options -> their help text, as argparse holds them."""
    (locate,) = [a for a in parser()._actions if a.dest == "command"][0].choices.values()
    return {s: action.help or "" for action in locate._actions for s in action.option_strings if s.startswith("--")}


def test_help_documents_every_option():
    result = subprocess.run([sys.executable, "-m", "headloc", "locate", "--help"], capture_output=True,
                            text=True, check=True)
    options = locate_help()
    assert len(options) >= 19
    for option in options:
        assert option in result.stdout, option
    assert all(name in result.stdout for name in methods.names())


def test_budget_help_names_every_budgeted_method_and_only_those():
    """group_testing and thompson take a budget as the compressed-sensing methods do."""
    text = locate_help()["--budget"]
    named = {name for name in methods.names() if re.search(rf"\b{name}\b", text)}
    assert named == set(BUDGETED) and {"group_testing", "thompson", "cs_adaptive"} <= named
    assert "the other methods take none" in text


def test_the_command_prints_the_top_k_and_writes_the_folder(tmp_path, tiny_model_dir):
    """On a tiny random Llama and headloc_ioi's first 4 documents: the printed top 2 is
    recovery.json's, whose one-shot values are the masks' scores read back from scores/0.tsv; with
    --quiet nothing but the result is printed."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [sys.executable, "-m", "headloc", "locate", "--model", str(tiny_model_dir), "--task", "headloc_ioi",
               "--method", "greedy1s", "--top-k", "2", "--documents", "4", "--batch-size", "8",
               "--out", str(tmp_path / "found"), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "found" / "recovery.json").read_text())
    assert record["search"] == "greedy1s_n4_s0" and record["task"] == "headloc_ioi"
    scores = pd.read_csv(tmp_path / "found" / "scores" / "0.tsv", sep="\t")["score"].to_numpy()
    heads = [f"L{i // 4}H{i % 4}" for i in range(8)]
    assert record["coef"] == pytest.approx({h: scores[1 + i] - scores[0] for i, h in enumerate(heads)})
    printed = re.findall(r"^\s+(\d)\s+(L\dH\d)\s+(\S+)\s+\[(\S+), (\S+)\]\s+(\S+)$", result.stdout, flags=re.M)
    assert [row[:2] for row in printed] == [("1", record["ranking"][0]), ("2", record["ranking"][1])]
    for _, head, value, low, high, p in printed:  # each head's value with its interval and P(top k), as recorded
        assert float(value) == pytest.approx(record["coef"][head], abs=1e-4)
        assert [float(low), float(high)] == pytest.approx(record["interval"][head], rel=1e-3, abs=1e-6)
        assert float(p) == pytest.approx(record["p_top_k"][head], abs=0.005)
    # a random model: nothing clears the noise, and the printed result says so with the reason
    assert record["found"] == [] and f"no head found above noise: {record['no_head_found']}" in result.stdout
    assert f"wrote {tmp_path / 'found'}" in result.stdout
    frame = pd.read_csv(tmp_path / "found" / "heads.csv")
    assert list(frame.columns) == ["model", "task", "search", "head", "layer", "index", "value", "rank", "status",
                                   "low", "high", "p_top_k", "found"]
    assert set(frame["status"]) == {"measured"}  # one-shot greedy scores every head alone
    assert result.stderr == ""  # no bar, no lm-eval message


def test_method_options_and_an_automatic_batch_size_reach_the_search(tmp_path, tiny_model_dir, monkeypatch, capsys):
    """--option values are read as YAML and passed to the method: group testing with no extra head and
    two masks per round (its search id says both), --batch-size auto on a CPU."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    out = tmp_path / "found"
    status = main(["locate", "--model", str(tiny_model_dir), "--task", "headloc_ioi", "--method", "group_testing",
                   "--budget", "12", "--top-k", "1", "--option", "extra_heads=0", "--option", "masks_per_round=2",
                   "--option", "group_size=auto", "--documents", "3", "--batch-size", "auto", "--out", str(out)])
    assert status == 0, capsys.readouterr().err[-3000:]
    record = json.loads((out / "recovery.json").read_text())
    assert record["search"] == "group_testing_m12_k1_gauto_per2_x0_n3_s0"
    assert 2 <= record["n_evals"] <= 12 and record["method"] == "group_testing"
    with np.load(out / "record.npz") as scored:  # the search's record: every mask it scored
        assert len(scored["masks"]) == record["n_evals"] and not scored["masks"][0].any()


@pytest.mark.parametrize("arguments, message", [
    (["--method", "group_testing", "--option", "extra_head=3"],
     "method 'group_testing' has no option 'extra_head'; its options are group_size (default 'auto'), "
     "masks_per_round (default 1), extra_heads (default 2)"),
    (["--method", "cs_stratified", "--option", "steps=3"], "method 'cs_stratified' takes no options, got {'steps': 3}"),
    (["--method", "group_testing", "--option", "extra_heads=1", "--option", "extra_heads=2"],
     "--option extra_heads given twice (1 and 2)"),
    (["--method", "cs_stratified", "--budget", "1"], "budget 1 is too small for cs_stratified: it needs at least 2 masks"),
    (["--budget", "1"], "method 'screened_greedy' spends no mask budget (budget=1)"),  # the default method
    (["--method", "cs_adaptive", "--budget", "2"], "budget 2 is too small for cs_adaptive: it needs at least 3"),
    (["--method", "thompson", "--budget", "1"], "budget 1 is too small for thompson: it needs at least 2 masks "
                                                 "(the unablated model's score, then at least one mask)"),
    (["--method", "greedy", "--budget", "10"], "method 'greedy' spends no mask budget (budget=10)"),
    (["--method", "group_testing", "--option", "extra_heads=-1"],
     "group_testing.extra_heads: -1 is not valid; expected an integer >= 0"),
    (["--sparsity", "2"], "sparsity: 2.0 is not valid; expected a number in (0, 1)"),
])
def test_bad_search_arguments_are_refused_before_the_model_loads(arguments, message, tmp_path, capsys):
    """The model folder does not exist: each error is the search's, said before loading it."""
    missing = str(tmp_path / "no-model")
    assert main(["locate", "--model", missing, "--task", "headloc_ioi", *arguments]) == 2
    err = capsys.readouterr().err
    assert f"headloc locate: {message}" in err and "cannot load model" not in err


@pytest.mark.parametrize("arguments, message", [
    (["--option", "extra_heads"], "invalid option 'extra_heads': expected KEY=VALUE, e.g. extra_heads=3"),
    (["--option", "x=[1"], "invalid option 'x=[1': its value is not a YAML value"),
    (["--batch-size", "0"], "invalid batch size '0': expected a positive number of rows or 'auto'"),
    (["--batch-size", "many"], "invalid batch size 'many'"),
])
def test_malformed_options_are_usage_errors(arguments, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["locate", "--model", "m", "--task", "headloc_ioi", *arguments])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_command_names_a_model_it_cannot_load(tmp_path, capsys):
    assert main(["locate", "--model", str(tmp_path / "nothing"), "--task", "headloc_ioi"]) == 2
    assert f"cannot load model {str(tmp_path / 'nothing')!r}" in capsys.readouterr().err


def test_a_gguf_model_is_converted_once_and_reused(tmp_path, monkeypatch, capsys):
    """The embedded model's name: converted into --models-dir/<name> on first use, read from there
    after; a checkpoint folder is read where it is."""
    from headloc.api import cli
    from headloc.model import loading

    conversions = []

    def convert(gguf, out):
        conversions.append(gguf)
        Path(out).mkdir(parents=True)
        (Path(out) / "config.json").write_text("{}")
        (Path(out) / "model.safetensors").write_bytes(b"")
        return Path(out)

    monkeypatch.setattr(loading, "convert_gguf", convert)
    first = cli.model_location("smollm2-135m-instruct", tmp_path / "models")
    assert first == str(tmp_path / "models" / "smollm2-135m-instruct") and len(conversions) == 1
    assert conversions[0] == loading.resolve_source("smollm2-135m-instruct").location
    assert "converting smollm2-135m-instruct" in capsys.readouterr().err
    assert cli.model_location("smollm2-135m-instruct", tmp_path / "models", quiet=True) == first
    assert len(conversions) == 1 and capsys.readouterr().err == ""
    assert cli.model_location(first, tmp_path / "elsewhere") == str(Path(first).resolve())


def test_an_unknown_model_name_says_what_is_valid(tmp_path, capsys):
    assert main(["locate", "--model", "smollm2", "--task", "headloc_ioi", "--models-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot load model 'smollm2'" in err and "smollm2-135m-instruct" in err


def run_locate(*arguments, cwd, extra=""):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HEADLOC_LOCATE_ARGS": extra}
    env.pop("TQDM_DISABLE", None)
    return subprocess.run([sys.executable, "-m", "headloc", "locate", *arguments], capture_output=True, text=True,
                          env=env, cwd=cwd)


def test_one_progress_bar_per_search_and_none_when_quiet(tmp_path, tiny_model_dir):
    """The default method on a tiny random Llama, through the real entry point: beside the model
    loader's bar and the search's evidence (a random model: no head found), on a line of its own,
    every line it draws on stderr is the search's one bar (screened greedy scores round after round;
    lm-eval's bars and messages are off); --quiet draws none. HEADLOC_LOCATE_ARGS comes after the
    command line."""
    common = ["--model", str(tiny_model_dir), "--task", "headloc_ioi", "--documents", "2", "--batch-size", "8"]
    shown = run_locate(*common, "--out", str(tmp_path / "shown"), cwd=tmp_path, extra="--top-k 2")
    assert shown.returncode == 0, shown.stderr[-3000:]
    lines = [line for line in re.split(r"[\r\n]", shown.stderr) if line.strip()]
    loader = [line for line in lines if line.startswith("Loading weights")]  # transformers' bar, before the search
    evidence = [line for line in lines if line.startswith("no head found above noise: ")]  # on a line of its own
    drawn = [line for line in lines if line not in loader and line not in evidence]
    assert len(evidence) == 1 and all(lines.index(evidence[0]) > lines.index(line) for line in loader), lines
    assert drawn and all(line.startswith("screened_greedy masks: ") for line in drawn), drawn[:20]
    assert all(re.fullmatch(r"screened_greedy masks: \d+mask \[[^]]*\]", line) for line in drawn), drawn
    counts = [int(re.match(r"screened_greedy masks: (\d+)", line)[1]) for line in drawn]
    assert counts == sorted(counts), f"a bar started again: {drawn}"  # one bar, not one per round
    record = json.loads((tmp_path / "shown" / "recovery.json").read_text())
    assert record["method"] == "screened_greedy" and len(record["ranking"]) == 8 and "k2" in record["search"]
    with np.load(tmp_path / "shown" / "record.npz") as scored:
        assert counts[-1] == len(scored["masks"])  # every mask the search scored
    quiet = run_locate(*common, "--top-k", "2", "--out", str(tmp_path / "quiet"), "--quiet", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-3000:]
    assert quiet.stdout.splitlines()[0] == shown.stdout.splitlines()[0]  # the same search
