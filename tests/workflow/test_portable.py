"""A results folder moves between checkouts: the cache is keyed on content, not on where files live.

Checkout A (a copy of this working tree's files at one path) runs the tiny workflow. Checkout B, a
second copy made afterwards at another path (every file newer than A's results, as after a fresh
`git clone`), gets A's results/ and .snakemake/ with `cp -a`; checkout C gets results/ alone. Each
checkout imports headloc from its own src/ (PYTHONPATH), so its task folder, its data file, its
model folder and its scripts all live at its own path. In B and C a dry run plans nothing and
`snakemake table2` re-renders nothing. Then a task file edited in B re-runs exactly the jobs that
use the task, and none of the model's.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, job_counts, tiny_llama
from headloc.data.datasets import build_docs

pytestmark = pytest.mark.slow

# Jobs that depend on the model alone; an edited task file must not re-run them.
MODEL_JOBS = {"model_geometry", "make_masks", "run_config", "collect_models"}


def checkout(dest: Path) -> Path:
    """This working tree's files (tracked and untracked, not ignored) copied to ``dest`` with fresh
    modification times, as a clone of the same commit at another path would have them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, dest / name)  # content only: the copy is dated now
    return dest


def run(work: Path, *args, check=True):
    """Snakemake with the checkout's own Snakefile, in the checkout, importing its own headloc."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": str(work / "src")}
    command = [sys.executable, "-m", "snakemake", "-s", str(work / "Snakefile"), *args,
               "--configfile", "config/portable.yaml"]
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed in {work}:\n{result.stdout[-4000:]}\n"
                             f"{result.stderr[-4000:]}")
    return result


def planned(result) -> dict[str, int]:
    """rule -> number of jobs from a dry run's job stats ({} when nothing is to be done)."""
    text = result.stdout + result.stderr
    if "Nothing to be done" in text:
        return {}
    return {rule: jobs for rule, jobs in job_counts(text).items() if rule != "total"}


def setup_checkout(work: Path, tokenizer):
    """The files a user adds to a checkout: a tiny model folder, a data file, a config (all relative)."""
    (work / "models" / "tiny").mkdir(parents=True)
    tiny_llama(len(tokenizer)).save_pretrained(work / "models" / "tiny")
    tokenizer.save_pretrained(work / "models" / "tiny")
    (work / "data").mkdir()
    (work / "data" / "ioi.jsonl").write_text(
        "".join(json.dumps(doc) + "\n" for doc in build_docs("ioi", n_docs=8)))
    config = {
        "models": {"tiny": {"source": "models/tiny", "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "data_file": "data/ioi.jsonl"}},
        "search": {"methods": ["cs_stratified"], "n_masks": 6, "sparsity": 0.25, "id_docs": 4, "chunks": 1,
                   "alpha": 0.001},
        "validation": {"top_k": 1},
        "universal": {"filter": False},
    }
    (work / "config" / "portable.yaml").write_text(yaml.safe_dump(config))


def copy_results(source: Path, dest: Path, metadata: bool):
    """What a user does: `cp -a` of results/ (and .snakemake/) into the other checkout."""
    for name in ["results", *([".snakemake"] if metadata else [])]:
        subprocess.run(["cp", "-a", str(source / name), str(dest / name)], check=True)


def mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_moved_results_are_up_to_date_and_an_edited_task_reruns_its_jobs(tmp_path, tokenizer):
    first = checkout(tmp_path / "first")
    setup_checkout(first, tokenizer)
    run(first, "--cores", "1")
    assert planned(run(first, "-n")) == {}
    # what Snakemake records to decide re-runs (params, inputs, ...) never names the checkout's path
    records = [p for p in (first / ".snakemake" / "metadata").iterdir() if p.is_file()]
    assert records and not [p for p in records if str(first) in p.read_text()]

    for name, metadata in (("second", True), ("third", False)):
        moved = checkout(tmp_path / name)  # dated after the results, as a later clone would be
        setup_checkout(moved, tokenizer)
        copy_results(first, moved, metadata)
        before = mtimes(moved / "results")
        dry = run(moved, "-n")
        assert planned(dry) == {}, f"{name} (.snakemake copied: {metadata}):\n{dry.stdout}\n{dry.stderr}"
        run(moved, "table2", "--cores", "1")
        assert mtimes(moved / "results") == before, "table2 re-rendered something"

    # An edited task file (in the second checkout's own task folder) re-runs what reads the task.
    second = tmp_path / "second"
    task_file = second / "src" / "headloc" / "tasks" / "headloc_ioi.yaml"
    assert task_file.is_file(), "the ioi task's YAML moved: update this test"
    task_file.write_text(task_file.read_text() + "# edited\n")
    jobs = planned(run(second, "table2", "-n"))
    # validate_headset comes after the recover_heads checkpoint, so the dry run cannot list it yet
    assert {"materialize_dataset", "subset_dataset", "score_masks", "recover_heads"} <= set(jobs), jobs
    assert not MODEL_JOBS & set(jobs), jobs
    before = mtimes(second / "results")
    run(second, "table2", "--cores", "1")
    after = mtimes(second / "results")
    changed = {name for name in before if after.get(name) != before[name]}
    assert {"data/ioi/test.jsonl", "tiny/evals/ioi/none.json", "tables/table2.csv"} <= changed
    model_only = {"tiny/geometry.json", "tiny/ioi/cs_stratified_m6_p0.25_n4_s0/masks.npy"}
    assert not model_only & changed, model_only & changed
    assert planned(run(second, "table2", "-n")) == {}
