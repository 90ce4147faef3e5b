"""The parts of issue 35's benchmark scripts that decide what they report: the documents the SmolLM2
comparison searches, its table, and the cs_adaptive that the variants are compared with."""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from headloc.data.datasets import identification_subset

REPO = Path(__file__).resolve().parents[2]


def script(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_smollm2_comparison_searches_the_workflows_identification_subset():
    vs = script("smollm2_vs_greedy")
    docs = [{"id": str(i)} for i in range(107)]
    for seed in range(4):
        kept = [int(d["id"]) for d in identification_subset(docs, 20, seed)]  # rule subset_dataset's draw
        assert vs.identification_ids(107, 20, seed) == kept


def test_the_smollm2_table_compares_each_seed_with_greedys(tmp_path):
    vs = script("smollm2_vs_greedy")
    rows = [  # two seeds; accuracy 0.8 unablated
        ("greedy", 0, ["A", "B"], 100, 0.1), ("greedy", 1, ["A", "C"], 100, 0.2),
        ("group_testing", 0, ["A", "D"], 10, 0.3), ("group_testing", 1, ["C", "A"], 6, 0.2),
    ]
    with (tmp_path / "ioi-s0.jsonl").open("w") as handle:
        for method, seed, top, evals, ablated in rows:
            handle.write(json.dumps({"kind": "validation", "task": "ioi", "seed": seed, "method": method, "top": top,
                                     "n_evals": evals, "seconds": 1.0, "clean": 0.8, "ablated": ablated}) + "\n")
    line = next(row for row in vs.table([tmp_path]).splitlines() if "| group_testing |" in row)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    # Delta Task -50 and -60: mean -55, s.e. 5; minus greedy's: +20 and 0; overlap 1 and 2; 8 % of greedy's
    assert cells[2:9] == ["2", "-55.0 ± 5.0", "+10.0 ± 10.0", "1.5", "8", "8.0 %", "1.0"]


def test_the_variants_baseline_is_the_workflows_cs_adaptive():
    av = script("adaptive_variants")
    from headloc.heads import HeadGeometry

    effect = np.zeros(60)
    effect[[4, 9, 30]] = [-0.4, -0.3, -0.2]
    noise = np.random.default_rng(0)
    score = lambda masks: 0.9 + np.asarray(masks) @ effect + 0.01 * noise.standard_normal(len(masks))  # noqa: E731
    geometry = HeadGeometry(6, 10)
    for seed in (0, 1):
        noise = np.random.default_rng(seed)  # the same noise for both runs: they score the same masks
        with tempfile.TemporaryDirectory() as tmp:
            driven = av.gt.drive(av.gt.methods.get("cs_adaptive"), score, geometry, Path(tmp), budget=40, seed=seed,
                                 k=3, sparsity=av.gt.SPARSITY, alpha=av.gt.ALPHA, log=av.gt.LOG)
        noise = np.random.default_rng(seed)
        ranking, n_evals = av.variant_ranking("built", score, 60, 3, 40, seed)
        assert [geometry.names[h] for h in ranking] == driven["ranking"] and n_evals == driven["n_evals"]
    for name in ("share50", "confirm", "residual"):
        ranking, n_evals = av.variant_ranking(name, score, 60, 3, 40, 0)
        assert sorted(ranking) == list(range(60)) and n_evals <= 40
        assert set(ranking[:3]) == {4, 9, 30}, name


def test_an_unknown_variant_is_refused():
    av = script("adaptive_variants")
    with pytest.raises(ValueError, match="unknown variant 'half'; expected one of built, share50, confirm, residual"):
        av.variant_ranking("half", lambda masks: np.zeros(len(masks)), 60, 3, 40, 0)
