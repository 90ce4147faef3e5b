"""Faults and determinism: a real run killed mid-chunk resumes without redoing finished chunks and
ends with the same results as an uninterrupted run; the same config and seeds give byte-identical
results (the uninterrupted run against a killed and resumed one); the SLURM profile dry-runs
without SLURM and retries scale memory and runtime with the attempt."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from base64 import urlsafe_b64encode
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.image import imread

from conftest import REPO, snakemake

SEARCH = "tiny/ioi/cs_stratified_m6_p0.25_n4_s3"
TARGET = f"results/{SEARCH}/recovery.json"
# what the determinism check compares: two tables and a figure, and everything they were made from
TABLES = [f"results/tables/{table}.{ext}" for table in ("table2", "table10") for ext in ("md", "csv")]
FIGURE = "results/figures/fig2.png"
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
# scoring chunks of the search: a kill lands while the second is scored, after the first is recorded
CHUNKS = 2


def small_config(model_dir):
    return {
        "models": {"tiny": {"source": str(model_dir), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 10}},
        "search": {"methods": ["cs_stratified"], "n_masks": 6, "sparsity": 0.25, "id_docs": 4,
                   "chunks": CHUNKS, "alpha": 0.001, "seed": 3},
        "validation": {"top_k": 2},
    }


def workdir(tmp_path_factory, model_dir, name):
    work = tmp_path_factory.mktemp(name)
    (work / "config.yaml").write_text(yaml.safe_dump(small_config(model_dir)))
    return work


def args(work, *extra, targets=(TARGET,)):
    return [*targets, "--cores", "1", "--directory", str(work), "--configfile", str(work / "config.yaml"), *extra]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_model_dir):
    """An uninterrupted run, to the search's recovery and the tables and figure made from it."""
    work = workdir(tmp_path_factory, tiny_model_dir, "uninterrupted")
    snakemake(*args(work, targets=(TARGET, *TABLES, FIGURE)))
    return work


def chunk_files(work):
    return sorted((work / "results" / SEARCH / "scores").glob("*.tsv"))


def recorded_chunks(work):
    """Chunk files whose job Snakemake recorded as finished. A job killed in the instant after it
    wrote its outputs keeps its incomplete marker (.snakemake/incomplete/<its output path in urlsafe
    base64>), and a resumed run rightly scores that chunk again: only recorded chunks must be kept."""
    return [path for path in chunk_files(work) if not incomplete_marker(work, path).exists()]


def incomplete_marker(work, path):
    return work / ".snakemake" / "incomplete" / urlsafe_b64encode(str(path.relative_to(work)).encode()).decode()


def start(work):
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), *args(work)]
    # cold jobs (headloc.workflow.warm): a chunk's job then takes seconds, not a fraction of one, so
    # that the kill lands while it runs
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HEADLOC_WARM_JOBS": "0"}
    # SIGINT as a terminal's Ctrl-C delivers it: a shell that starts tests in the background may
    # leave SIGINT ignored, and an ignored signal stays ignored in children
    return subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_a_running_chunk(work, process, timeout=600):
    """Block until one chunk is finished and another one's job has started (its log exists)."""
    logs = work / "results" / "logs" / "score_masks" / SEARCH
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = {p.stem for p in chunk_files(work)}
        running = {p.stem for p in logs.glob("*.log")} - done
        if done and running:
            return
        if process.poll() is not None:
            pytest.fail(f"the run ended before a chunk was running:\n{process.stdout.read()[-3000:]}")
        time.sleep(0.05)
    pytest.fail("no chunk started in time")


def assert_every_target_whole(work):
    """Every file the run left is complete (temporary files of killed writers are hidden: .name.*.tmp)."""
    for path in (work / "results").rglob("*"):
        if not path.is_file() or path.name.startswith(".") or {"logs", "benchmarks"} & set(path.parts):
            continue
        if path.suffix == ".npy":
            np.load(path)
        elif path.suffix == ".tsv":
            assert len(pd.read_csv(path, sep="\t")) > 0, path
        elif path.suffix == ".jsonl":
            assert all(json.loads(line) for line in path.read_text().splitlines()), path
        elif path.suffix == ".json":
            json.loads(path.read_text())


def stats(paths):
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}


@dataclass
class Interrupted:
    """What one run killed mid-chunk left, and what resuming it with the same command did."""

    work: Path
    returncode: int  # of the killed run
    finished: list  # chunk files recorded as finished right after the kill
    kept: dict  # their and masks.npy's (inode, mtime) then
    incomplete_markers: list  # .snakemake/incomplete after the kill
    locks: list  # .snakemake/locks after the kill
    locked: subprocess.CompletedProcess | None  # SIGKILL: the same command again, before --unlock
    resumed: subprocess.CompletedProcess  # the same command, to the end


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, tiny_model_dir) -> dict:
    """Signal name -> Interrupted: a run killed (as Ctrl-C, scancel or a dying node would) while a
    chunk was being scored, then resumed. The SIGTERM run then goes on to the tables and figure of
    the reference, for the determinism check."""
    runs = {}
    for sig in SIGNALS:
        work = workdir(tmp_path_factory, tiny_model_dir, f"killed-{sig.name}")
        process = start(work)
        wait_for_a_running_chunk(work, process)
        os.killpg(process.pid, sig)  # the whole run
        process.wait(timeout=120)
        finished = recorded_chunks(work)
        assert_every_target_whole(work)  # before anything runs again
        state = dict(work=work, returncode=process.returncode, finished=finished,
                     kept=stats(finished + [work / "results" / SEARCH / "masks.npy"]),
                     incomplete_markers=list((work / ".snakemake" / "incomplete").glob("*")),
                     locks=list((work / ".snakemake" / "locks").glob("*")), locked=None)
        if sig == signal.SIGKILL:  # no clean-up ran: Snakemake's lock stays until --unlock (docs/pitfalls.md)
            state["locked"] = snakemake(*args(work), check=False)
            snakemake(*args(work, "--unlock"))
        state["resumed"] = snakemake(*args(work))  # the same command; profiles/default reruns incomplete jobs
        runs[sig.name] = Interrupted(**state)
    snakemake(*args(runs["SIGTERM"].work, targets=(*TABLES, FIGURE)))
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_killed_mid_chunk_resumes_without_redoing_finished_chunks(interrupted, reference, sig):
    run = interrupted[sig.name]
    work, kept = run.work, run.kept
    assert run.returncode != 0
    assert 0 < len(run.finished) < CHUNKS, "killed while a chunk was being scored"
    if sig == signal.SIGINT:  # Ctrl-C: the killed job keeps an incomplete marker (docs/pitfalls.md)
        scores = work / "results" / SEARCH / "scores"
        running = [incomplete_marker(work, scores / f"{chunk}.tsv") for chunk in range(CHUNKS)]
        assert set(run.incomplete_markers) & set(running), "Ctrl-C left no incomplete marker"
        assert not run.locks, "Ctrl-C left the lock"
    if sig == signal.SIGKILL:
        assert run.locked.returncode != 0 and "--unlock" in run.locked.stdout + run.locked.stderr

    assert stats(work / "results" / SEARCH / "scores" / name for name in kept if name.endswith(".tsv")) == {
        name: stat for name, stat in kept.items() if name.endswith(".tsv")}, "finished chunks are not redone"
    assert stats([work / "results" / SEARCH / "masks.npy"]) == {"masks.npy": kept["masks.npy"]}
    out = run.resumed.stdout + run.resumed.stderr
    assert out.count("rule score_masks:") == CHUNKS - len(run.finished)
    for path in chunk_files(reference) + [reference / TARGET]:
        relative = path.relative_to(reference)
        assert (work / relative).read_bytes() == path.read_bytes(), relative
    assert_every_target_whole(work)


def compared(results):
    """Every result file except logs, benchmarks, figures (metadata) and hidden temporaries."""
    return sorted(
        p.relative_to(results) for p in results.rglob("*")
        if p.is_file() and not p.name.startswith(".")
        and not {"logs", "benchmarks", "figures", "models"} & set(p.relative_to(results).parts)
    )


@pytest.mark.slow
def test_the_same_config_and_seeds_give_byte_identical_results(interrupted, reference):
    """Subsets, masks, scores, recoveries, evaluations and tables of two runs of one config: the
    uninterrupted reference and the run killed with SIGTERM, resumed and taken to the same targets."""
    first, second = reference / "results", interrupted["SIGTERM"].work / "results"
    files = compared(first)
    assert files == compared(second)
    kinds = {p.suffix for p in files}
    assert {".jsonl", ".npy", ".tsv", ".json", ".md", ".csv"} <= kinds, kinds
    assert any("id_4_seed3" in p.name for p in files) and any(p.name == "recovery.json" for p in files)
    different = [str(p) for p in files if (first / p).read_bytes() != (second / p).read_bytes()]
    assert different == []
    # figures differ at most in metadata
    assert (imread(first.parent / FIGURE) == imread(second.parent / FIGURE)).all()


def test_slurm_profile_dry_run_without_slurm(monkeypatch, tmp_path):
    """The demo's dry run through profiles/slurm in an empty directory: its jobs and their resources."""
    monkeypatch.setenv("SBATCH_ACCOUNT", "proj42")
    monkeypatch.setenv("HEADLOC_GPU_PARTITION", "gpu-a100")
    monkeypatch.delenv("SBATCH_PARTITION", raising=False)
    result = snakemake("-n", "--profile", str(REPO / "profiles/slurm"), "--configfile", str(REPO / "config/demo.yaml"),
                       "--directory", str(tmp_path))
    out = result.stdout + result.stderr
    assert "Using profiles" in out and "profiles/slurm" in out
    # the demo's main method: one search_job per task (screened greedy scores its own masks in one job)
    demo = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    assert demo["search"]["methods"] == ["screened_greedy"], "the demo's default changed: update this test"
    search_jobs = [block for block in out.split("\nrule ") if block.startswith("search_job:")]
    assert search_jobs, out[-2000:]
    for block in search_jobs:
        resources = next(line for line in block.splitlines() if line.strip().startswith("resources:"))
        # attempt 1 of rules/resources.smk: 4000 MB + 1.5 x the 135M-parameter demo model in float32
        # (sized from its GGUF file: 2 x 86 MB parameters at most, x 4 bytes), rounded up to 1000
        for item in ("slurm_account=proj42", "slurm_partition=gpu-a100", "gpu=1", "cpus_per_gpu=4",
                     "mem_mb=6000", "runtime=120"):
            assert item in resources, resources
    counts = dict(line.split()[:2] for line in result.stdout.splitlines()
                  if line.split()[:1] and line.split()[0] in {"search_job", "score_masks", "recover_heads"})
    n_tasks = len(demo["tasks"])
    assert int(counts["search_job"]) == n_tasks == len(search_jobs) and int(counts["recover_heads"]) == n_tasks
    assert "score_masks" not in counts  # no mask design to score in chunks
    materialize = next(block for block in out.split("\nrule ") if block.startswith("materialize_dataset:"))
    assert "slurm_partition=," in materialize or "slurm_partition=\n" in materialize  # SBATCH_PARTITION unset


# the rules that load a model to evaluate it: each takes the evaluating jobs' template (rules/resources.smk)
EVALUATING = {"score_masks", "score_stage2_masks", "score_greedy_masks", "search_job", "score_top_heads",
              "validate_headset", "single_head_damage"}


def test_every_job_holding_a_gpu_goes_to_the_gpu_partition_on_slurm(monkeypatch, tmp_path):
    """A dry run through profiles/slurm of a config with a method of every kind, tuning and one
    validation: each job with gpu=1 goes to HEADLOC_GPU_PARTITION and every other job to
    SBATCH_PARTITION (a sequential search's job and score_stage2_masks once went to the default partition
    with a GPU request), and every evaluating rule is among them."""
    monkeypatch.setenv("HEADLOC_GPU_PARTITION", "gpu-x")
    monkeypatch.setenv("SBATCH_PARTITION", "cpu-y")
    config = {"models": {"smollm2-135m": {"source": "smollm2-135m-instruct"}},
              # capitals, evaluated only, is a second capability: universal heads are measured alone
              "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 20},
                        "capitals": {"lm_eval_task": "headloc_capitals", "localize": False}},
              "search": {"methods": ["cs_stratified", "cs_adaptive", "greedy1s", "greedy", "attribution", "random",
                                     "group_testing", "guided_greedy"], "n_masks": 20, "id_docs": 10},
              "tuning": {"tasks": ["ioi"], "n_masks": [20], "sparsity": [0.05]}, "universal": {"filter": False}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("all", "tuning", "results/smollm2-135m/evals/ioi/none.json", "-n", "--profile",
                       str(REPO / "profiles/slurm"), "--configfile", str(tmp_path / "config.yaml"),
                       "--directory", str(tmp_path))
    partitions = {}
    for block in re.split(r"\n(?:rule|checkpoint) ", result.stdout + result.stderr)[1:]:
        name, resources = block.split(":", 1)[0], next(line for line in block.splitlines() if "resources:" in line)
        partitions.setdefault(name, set()).add(("gpu=1" in resources, "slurm_partition=gpu-x" in resources,
                                                "slurm_partition=cpu-y" in resources))
    holding = {name for name, seen in partitions.items() if any(gpu for gpu, _, _ in seen)}
    assert holding == EVALUATING, partitions
    for name, seen in partitions.items():
        assert seen == ({(True, True, False)} if name in holding else {(False, False, True)}), (name, seen)


@pytest.mark.slow
def test_retries_ask_for_more_memory_and_time(tmp_path):
    """A real Snakemake run of rules/resources.smk's callables: a job that fails twice is retried
    with mem_mb and runtime of attempt 2, then 3, never above HEADLOC_MAX_MEM_MB / _RUNTIME."""
    (tmp_path / "Snakefile").write_text(f'''
include: "{REPO / "rules/resources.smk"}"

rule flaky:
    output: "done.txt"
    resources:
        mem_mb=eval_mem_mb,
        runtime=eval_runtime,
    shell: "echo {{resources.mem_mb}} {{resources.runtime}} >> attempts.txt; test $(wc -l < attempts.txt) -ge 3 && touch {{output}}"
''')
    command = [sys.executable, "-m", "snakemake", "--cores", "1", "--retries", "2"]
    env = {**os.environ, "HEADLOC_MAX_MEM_MB": "64000", "HEADLOC_MAX_RUNTIME": "300"}
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # no model wildcard: the unknown-model default, 32000 MB; 120 minutes
    assert (tmp_path / "attempts.txt").read_text().split("\n")[:3] == [
        "32000 120", "64000 240", "64000 300"]
