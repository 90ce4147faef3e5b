"""The same config and seeds give byte-identical subsets, masks, scores, recoveries and tables."""

import pytest
import yaml
from matplotlib.image import imread

from conftest import snakemake

TARGETS = [f"results/tables/{table}.{ext}" for table in ("table2", "table10") for ext in ("md", "csv")]
FIGURE = "results/figures/fig2.png"


def small_config(model_dir):
    return {
        "models": {"tiny": {"source": str(model_dir), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 10},
                  "capitals": {"lm_eval_task": "headloc_capitals", "n_docs": 8}},
        "search": {"methods": ["cs_stratified"], "n_masks": 6, "sparsity": 0.25, "id_docs": 4,
                   "chunks": 2, "alpha": 0.001, "seed": 3},
        "validation": {"top_k": 1},
    }


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_model_dir):
    runs = []
    for name in ("first", "second"):
        work = tmp_path_factory.mktemp(name)
        (work / "config.yaml").write_text(yaml.safe_dump(small_config(tiny_model_dir)))
        snakemake(*TARGETS, FIGURE, "--cores", "2", "--directory", str(work), "--configfile", str(work / "config.yaml"))
        runs.append(work / "results")
    return runs


def compared(results):
    """Every result file except logs, benchmarks, figures (metadata) and hidden temporaries."""
    return sorted(
        p.relative_to(results) for p in results.rglob("*")
        if p.is_file() and not p.name.startswith(".")
        and not {"logs", "benchmarks", "figures", "models"} & set(p.relative_to(results).parts)
    )


@pytest.mark.slow
def test_two_runs_are_byte_identical(two_runs):
    first, second = two_runs
    files = compared(first)
    assert files == compared(second)
    kinds = {p.suffix for p in files}
    assert {".jsonl", ".npy", ".tsv", ".json", ".md", ".csv"} <= kinds, kinds
    assert any("id_4_seed3" in p.name for p in files) and any(p.name == "recovery.json" for p in files)
    different = [str(p) for p in files if (first / p).read_bytes() != (second / p).read_bytes()]
    assert different == []


@pytest.mark.slow
def test_figures_differ_at_most_in_metadata(two_runs):
    first, second = two_runs
    assert (imread(first.parent / FIGURE) == imread(second.parent / FIGURE)).all()
