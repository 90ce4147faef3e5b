"""The throughput benchmark (headloc.engine.throughput and .throughput_report, benchmarks/throughput.py):
the released procedure's ablation, the token count, the ceiling's arithmetic, the comparison of
results and the report's ratios against hand-worked numbers; and the script on a tiny model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import tiny_llama
from headloc.engine import throughput, throughput_report
from headloc.heads import HeadGeometry
from headloc.model.ablation import ablate_heads, masks_to_gate

REPO = Path(__file__).resolve().parents[2]


def test_zeroing_the_heads_weights_is_the_engines_ablation():
    """The released code's ablation (o_proj columns set to zero) and headloc's (a gate on the
    heads' outputs) give the same logits."""
    model = tiny_llama(64)
    rows = torch.randint(3, 64, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = np.zeros(8, dtype=np.int8)
    mask[[1, 6]] = 1  # L0H1 and L1H2
    with torch.no_grad(), ablate_heads(model, masks_to_gate(mask, HeadGeometry.of(model.config))):
        gated = model(rows).logits
    with torch.no_grad():
        whole = model(rows).logits
    throughput.zero_heads(model, mask)
    with torch.no_grad():
        zeroed = model(rows).logits
    assert torch.allclose(zeroed, gated, atol=1e-6) and not torch.allclose(zeroed, whole, atol=1e-3)


def test_the_token_counter_counts_every_position_through_the_embedding():
    model, counter = tiny_llama(64), throughput.TokenCounter()
    handle = counter.attach(model)
    with torch.no_grad():
        model(torch.ones(3, 5, dtype=torch.long))
        model(torch.ones(2, 4, dtype=torch.long))
    handle.remove()
    with torch.no_grad():
        model(torch.ones(9, 9, dtype=torch.long))
    assert counter.tokens == 3 * 5 + 2 * 4


def test_the_ceiling_times_every_linear_layer_of_a_forward_pass():
    model = tiny_llama(100)
    shapes = throughput.linear_shapes(model.config)
    # per layer q (32x32), k and v (32x16: 2 KV heads of 8), o (32x32), gate and up (32x64), down (64x32)
    assert shapes[:7] == [(32, 32), (32, 16), (32, 16), (32, 32), (32, 64), (32, 64), (64, 32)]
    # the model's own linear weights: every one of them, the LM head included, once per token
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert sum(a * b for a, b in shapes) == linear == 2 * 9216 + 3200
    ceiling = throughput.matmul_ceiling(model.config, rows=8, repeats=1)
    assert ceiling["flops_per_token"] == 2 * linear and ceiling["rows"] == 8 and ceiling["tokens_per_s"] > 0


def run(score, samples):
    return {"score": score, "samples": samples}


def test_differences_by_hand():
    loglik = [run(0.5, [{"response": [[-1.0, True], [-2.0, False]]}]), run(0.25, [{"response": [[-3.0, True]]}])]
    nearly = [run(0.5, [{"response": [[-1.0004, True], [-2.0, False]]}]), run(0.25, [{"response": [[-3.0, True]]}])]
    got = throughput_report.differences(loglik, nearly)
    assert got["max_score_diff"] == 0 and got["max_loglik_diff"] == pytest.approx(4e-4) and got["different_texts"] == 0
    assert throughput_report.same(got)
    texts = [run(0.5, [{"response": "Paris"}, {"response": "Rome"}])]
    other = [run(0.0, [{"response": "Paris"}, {"response": "Roma"}])]
    got = throughput_report.differences(texts, other)
    assert (got["max_score_diff"], got["different_texts"]) == (0.5, 1) and not throughput_report.same(got)
    assert not throughput_report.same({"max_score_diff": 0, "different_texts": 0, "max_loglik_diff": 2e-3})


def variant(label, seconds, tokens, score=0.5):
    return {"label": label, "seconds": seconds, "setup": 0.1, "tokens": tokens,
            "results": [run(score, [{"response": "x"}])] * 4}


def test_the_report_divides_by_the_released_procedure():
    timed = {"ioi": {"a": variant("(a) released", 10.0, 400), "b": variant("(b) in turn", 2.0, 400),
                     "c": variant("(c) grouped", 1.0, 400)}}
    assert throughput_report.summarise(timed, 4, {"tokens_per_s": 800.0}) is True
    c = timed["ioi"]["c"]
    # 4 masks in 1 s: 0.25 s a mask, 400 tokens/s = half the ceiling, a tenth of (a)'s time
    assert (c["s_per_mask"], c["tokens_per_s"], c["of_ceiling"], c["ratio_to_a"]) == (0.25, 400.0, 0.5, 0.1)
    assert c["vs_a"] == {"max_score_diff": 0, "max_loglik_diff": 0.0, "different_texts": 0}
    lines = throughput_report.report_lines(timed, True)
    assert "  ioi: (b)/(a) = 0.200, (c)/(a) = 0.100  ->  (c) is 10.0x faster than (a)" in lines
    assert lines[-1].startswith("results ARE the same")
    row = next(line for line in lines if line.startswith("ioi       (c) grouped"))
    assert row.split()[3:] == ["0.25", "0.100", "10.0x", "400", "400", "50%", "0.1"]


def test_without_the_released_procedure_b_is_the_reference_and_a_difference_is_reported():
    timed = {"capitals": {"b": variant("(b)", 2.0, 100), "c": variant("(c)", 1.0, 100, score=0.25)}}
    assert throughput_report.summarise(timed, 4, {"tokens_per_s": 100.0}) is False
    assert timed["capitals"]["c"]["vs_b"]["max_score_diff"] == 0.25 and np.isnan(timed["capitals"]["c"]["ratio_to_a"])
    lines = throughput_report.report_lines(timed, False)
    assert "  capitals (c) vs (b): SCORES DIFFER (max |diff| 0.25), max |loglik diff| 0.0e+00, 0 different " \
           "generated texts" in lines
    assert lines[-1].startswith("results DIFFER") and not any("faster than (a)" in line for line in lines)


@pytest.mark.parametrize("settings, message", [
    ({"masks": 0}, "masks must be >= 1, got 0"),
    ({"rows_per_pass": 4, "masks_per_pass": 8}, "rows_per_pass 4 cannot hold masks_per_pass 8 masks"),
    ({"docs": 200}, "docs 200: the capitals task has 107 documents"),
    ({"tasks": ("ioi", "gsm8k")}, r"unknown tasks \['gsm8k'\]; expected some of \['capitals', 'induction', 'ioi'\]"),
    ({"sparsity": 1.5}, "sparsity must be between 0 and 1, got 1.5"),
])
def test_bad_settings_are_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        throughput.Settings(**settings)


def test_the_script_times_both_engines_on_a_tiny_model(tiny_model_dir, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("benchmark_throughput", REPO / "benchmarks" / "throughput.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "throughput.json"
    code = script.main(["--model-dir", str(tiny_model_dir), "--masks", "2", "--docs", "2", "--tasks", "ioi",
                        "--skip-released", "--threads", "1", "--json", str(out)])
    report = json.loads(out.read_text())
    b, c = report["tasks"]["ioi"]["b"], report["tasks"]["ioi"]["c"]
    assert code == 0 and b["scores"] == c["scores"] and len(b["scores"]) == 2
    assert b["tokens"] > 0 and c["vs_b"]["max_score_diff"] == 0 and report["masks"] == 2
    assert "results ARE the same" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        script.main(["--rows-per-pass", "2"])  # cannot hold 8 masks: refused before any work
