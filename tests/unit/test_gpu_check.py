"""The GPU check's code (headloc.benchmarks.gpu_check and its gpu_* section modules,
benchmarks/gpu_check.py) on the CPU: its scoring against an independent per-mask reference, its
checks on the tests' planted model (passing, and failing on a model without the planted head), the
back-off section under injected out-of-memory errors, and the script's quick run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import tiny_llama, zeroed_copy
from headloc.benchmarks import gpu_check, gpu_planted, gpu_scores, gpu_throughput
from headloc.model.memory import Shape

REPO = Path(__file__).resolve().parents[2]


def reference_scores(model, rows, gold, masks) -> np.ndarray:
    """Per mask, a copy of the model with the heads' o_proj columns zeroed, whole rows, one pass."""
    scores = []
    for mask in masks:
        with torch.no_grad():
            logits = zeroed_copy(model, mask)(rows).logits[:, -1]
        scores.append(float(torch.log_softmax(logits, -1)[torch.arange(len(gold)), gold].mean()))
    return np.array(scores)


def test_gold_scores_are_each_masks_mean_gold_log_probability():
    model = tiny_llama(64)
    generator = torch.Generator().manual_seed(0)
    rows, gold = torch.randint(3, 64, (5, 6), generator=generator), torch.randint(3, 64, (5,), generator=generator)
    masks = np.array([[0] * 8, [1, 0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 1, 0, 0, 0, 0]], dtype=np.int8)
    expected = reference_scores(model, rows, gold, masks)
    assert len(set(np.round(expected, 4))) == 3  # the masks do change the score
    for per_pass, rows_per_pass in ((1, 64), (2, 4), (3, 256)):  # 4 rows of 2 masks: 2 documents a pass
        got = gpu_scores.gold_scores(model, rows, gold, masks, masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
        assert got == pytest.approx(expected, abs=1e-5)
    kept = gpu_scores.gold_scores(model, rows, gold, masks, masks_per_pass=2, rows_per_pass=4, keep_all=True)
    assert kept == pytest.approx(expected, abs=1e-5)


def test_a_pass_holds_at_most_rows_per_pass_rows():
    """Documents x masks per forward pass stay within rows_per_pass (the engine's memory bound): 2
    masks a pass in 4 rows take 2 documents at a time."""
    model = tiny_llama(64)
    rows, gold = torch.randint(3, 64, (5, 6), generator=torch.Generator().manual_seed(0)), torch.arange(3, 8)
    masks = np.eye(8, dtype=np.int8)[:4]
    passes = []
    handle = model.get_input_embeddings().register_forward_pre_hook(lambda module, args: passes.append(len(args[0])))
    gpu_scores.gold_scores(model, rows, gold, masks, masks_per_pass=2, rows_per_pass=4)
    handle.remove()
    assert passes == [4, 4, 2] * 2  # 2 masks x (2, 2, 1) documents, for each pair of masks


def planted_task():
    from planted import FIRST_TOKEN, LENGTH, N_HEADS, N_LAYERS, PLANTED, VOCAB

    return gpu_planted.Planted(vocab=VOCAB, length=LENGTH, layers=N_LAYERS, heads=N_HEADS, planted=PLANTED,
                               first_token=FIRST_TOKEN)


def test_the_planted_checks_pass_on_a_planted_model_and_fail_without_its_head():
    from planted import planted_model, weakened

    report = gpu_scores.Report(log=lambda line: None)
    gpu_planted.planted_checks(report, planted_model(), planted_task())
    assert report.failed == []
    planted = report.figures["planted"]
    assert planted["top single-head effect is planted"] == "ok" and planted["8 masks/pass == 1 mask/pass"] == "ok"
    assert planted["score, planted head ablated"] < np.log(1 / 21) < planted["score unablated (mean log p)"]
    assert report.figures["bf16"]["top head agrees"] == "ok"
    broken = gpu_scores.Report(log=lambda line: None)
    gpu_planted.planted_checks(broken, weakened(planted_model(), 0.0), planted_task())  # the planted head removed
    assert [f for f in broken.failed if f.startswith("planted: top single-head effect is planted (top ")]


def test_the_planted_checks_fail_where_several_masks_a_pass_disagree_with_one(monkeypatch):
    """Scores of 8 masks a pass that drift from 1 mask a pass (injected: 1e-3 on every mask scored
    with others) fail the check that compares them."""
    from planted import planted_model

    real = gpu_scores.gold_scores

    def drifting(*args, masks_per_pass, **kwargs):
        return real(*args, masks_per_pass=masks_per_pass, **kwargs) + (1e-3 if masks_per_pass > 1 else 0.0)

    monkeypatch.setattr(gpu_planted, "gold_scores", drifting)
    report = gpu_scores.Report(log=lambda line: None)
    gpu_planted.planted_checks(report, planted_model(), planted_task())
    assert report.figures["planted"]["8 masks/pass == 1 mask/pass"] == "FAILED"
    assert [f for f in report.failed if f.startswith("planted: 8 masks/pass == 1 mask/pass (max |diff| 1.00e-03)")]


def test_the_backoff_section_halves_to_a_size_that_fits(monkeypatch):
    """Out-of-memory errors injected above 4 rows a pass: the section must find 4 rows and score as a run
    started there."""
    model = gpu_throughput.random_model("quick", "cpu", torch.float32)
    real = gpu_scores.gold_scores

    def bounded(*args, rows_per_pass, **kwargs):
        if rows_per_pass > 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(*args, rows_per_pass=rows_per_pass, **kwargs)

    monkeypatch.setattr(gpu_throughput, "gold_scores", bounded)
    report = gpu_scores.Report(log=lambda line: None)
    gpu_throughput.backoff_section(report, model, Shape.of(model.config.to_dict()), "cpu", quick=True)
    assert report.figures["backoff"]["start rows -> working rows"] == "16 -> 4" and report.failed == []


def test_a_failed_check_is_listed_and_an_unknown_section_refused():
    lines = []
    report = gpu_scores.Report(log=lines.append)
    report.check("bf16", "top head agrees", False, "bf16 top 3")
    report.say("bf16", "spearman", 0.123456)
    assert report.failed == ["bf16: top head agrees (bf16 top 3)"]
    assert lines[1] == f"{'bf16':<11} {'spearman':<38} 0.1235"
    with pytest.raises(ValueError, match=r"unknown sections \['plant'\]; expected some of planted, throughput, slot"):
        gpu_check.run_checks("cpu", skip=["plant"])


def test_the_script_runs_the_quick_sections_on_the_cpu(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("benchmark_gpu_check", REPO / "benchmarks" / "gpu_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "gpu_check.json"
    code = script.main(["--quick", "--device", "cpu", "--skip", "planted", "slot", "engine", "--json", str(out)])
    record = json.loads(out.read_text())
    assert code == 0 and record["failed"] == [] and capsys.readouterr().out.endswith("every check passed\n")
    assert record["figures"]["backoff"]["scores == a run at the working size"] == "ok"
    assert {f"quick: masks/s, {n} per pass, {r} rows" for n, r in ((1, 64), (8, 128), (32, 256))} <= set(
        record["figures"]["throughput"])
