"""profiles/slurm on a real single-node Slurm (tools/slurm/start.sh: slurmctld, slurmd, munged, a
fake GPU, no accounting database): a tiny workflow runs through sbatch, one running score_masks job
is scancel'ed and retried with more memory and time (capped), and every result is byte-identical
to a local run of the same config.

Marked `slurm` (not run by `make test`): `.venv/bin/pytest -m slurm tests/slurm -rA` as root on
Debian (it apt-get installs slurm-wlm and munge when missing). Skipped, with the reason, when
Slurm cannot be started; HEADLOC_REQUIRE_SLURM=1 (set by .ci/run) makes that a failure instead.
HEADLOC_SLURM_ACCOUNTING=1 runs it on a cluster with an accounting database (slurmdbd, MariaDB)
and submits with SBATCH_ACCOUNT=headloc-test; without it the cluster has no accounting.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, snakemake

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

STATE = Path(os.environ.get("HEADLOC_SLURM_STATE", "/tmp/headloc-slurm-test"))
TARGETS = ["results/tables/table2.md", "results/tables/table2.csv", "results/tables/table10.md",
           "results/tables/table10.csv"]
NODE_MEM_MB = 16000
MAX_MEM_MB, EVAL_RUNTIME, MAX_RUNTIME = 6000, 10, 15  # the retry's 2x is capped at these
RUN_TIMEOUT = 900  # seconds for the whole Slurm run (it takes about 2 minutes; a hang ends here)
ACCOUNTING = os.environ.get("HEADLOC_SLURM_ACCOUNTING") == "1"
ACCOUNT = "headloc-test"  # the account tools/slurm/start.sh creates with accounting


def small_config(model_dir):
    return {
        "models": {"tiny": {"source": str(model_dir), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 10}},
        "search": {"methods": ["cs_stratified"], "n_masks": 6, "sparsity": 0.25, "id_docs": 4,
                   "chunks": 3, "alpha": 0.001, "seed": 3},
        "validation": {"top_k": 1},
    }


def compared(results):
    """Every result file except logs, benchmarks, figures and hidden temporaries."""
    return sorted(
        p.relative_to(results) for p in results.rglob("*")
        if p.is_file() and not p.name.startswith(".")
        and not {"logs", "benchmarks", "figures", "models"} & set(p.relative_to(results).parts)
    )


def daemon_pids(state):
    pids = {}
    for name, pidfile in (("slurmctld", "slurmctld.pid"), ("slurmd", "slurmd.pid"),
                          ("munged", "munge/munged.pid"), ("slurmdbd", "slurmdbd.pid"),
                          ("mariadbd", "mysql.pid")):
        path = state / pidfile
        if path.is_file() and path.read_text().strip():
            pids[name] = int(path.read_text())
    return pids


@pytest.fixture(scope="module")
def cluster():
    """A running single-node Slurm: the environment its clients need; stopped afterwards."""
    start = subprocess.run([str(REPO / "tools/slurm/start.sh"), str(STATE)], capture_output=True,
                           text=True, timeout=1200)
    if start.returncode != 0:
        reason = (start.stderr.strip().splitlines() or [f"exit status {start.returncode}"])[-1]
        if os.environ.get("HEADLOC_REQUIRE_SLURM") == "1":
            pytest.fail(f"{reason}\n{start.stderr[-3000:]}")
        pytest.skip(reason)
    pids = daemon_pids(STATE)
    assert set(pids) == {"slurmctld", "slurmd", "munged"} | (
        {"slurmdbd", "mariadbd"} if ACCOUNTING else set()), pids
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SBATCH_", "SLURM_", "HEADLOC_"))}
    env["SLURM_CONF"] = str(STATE / "slurm.conf")
    try:
        yield env
    finally:
        subprocess.run([str(REPO / "tools/slurm/stop.sh"), str(STATE)], timeout=120)
        alive = [name for name, pid in pids.items() if Path(f"/proc/{pid}").exists()]
        assert alive == [], f"daemons still running after tools/slurm/stop.sh: {alive}"
        assert not STATE.exists()


def squeue(env, *args):
    return subprocess.run(["squeue", "-h", *args], env=env, capture_output=True, text=True,
                          timeout=30).stdout


def job_environment(env, jobid, wait=3.0):
    """The environment of the job's processes (read from /proc on this single node). squeue says
    RUNNING a moment before the job's step has processes, so look again for up to ``wait`` s."""
    deadline = time.monotonic() + wait
    while True:
        listing = subprocess.run(["scontrol", "listpids", jobid], env=env, capture_output=True, text=True,
                                 timeout=30).stdout
        for pid in re.findall(r"^(\d+)\s", listing, re.MULTILINE):
            try:
                raw = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            pairs = (item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
            return dict(pairs)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory, tiny_model_dir):
    """The same config run locally and through profiles/slurm, one score_masks job cancelled."""
    config = small_config(tiny_model_dir)
    local = tmp_path_factory.mktemp("local")
    (local / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(*TARGETS, "--cores", "2", "--directory", str(local), "--configfile",
              str(local / "config.yaml"))

    work = tmp_path_factory.mktemp("slurm")
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    env = {**cluster, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HEADLOC_GPU_PARTITION": "gpu",
           "HEADLOC_MAX_MEM_MB": str(MAX_MEM_MB), "HEADLOC_EVAL_RUNTIME": str(EVAL_RUNTIME),
           "HEADLOC_MAX_RUNTIME": str(MAX_RUNTIME)}
    if ACCOUNTING:
        env["SBATCH_ACCOUNT"] = ACCOUNT
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--profile",
               str(REPO / "profiles/slurm"), "--configfile", str(work / "config.yaml"), "--verbose",
               "--slurm-init-seconds-before-status-checks", "1", *TARGETS]
    log_path = work / "snakemake.log"
    started = time.monotonic()
    cancelled = None
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            while process.poll() is None and time.monotonic() - started < RUN_TIMEOUT:
                if cancelled is None:
                    for line in squeue(cluster, "-o", "%i|%T|%k").splitlines():
                        jobid, state, comment = line.split("|", 2)
                        if state == "RUNNING" and comment.startswith("rule_score_masks_"):
                            job_env = job_environment(cluster, jobid)
                            subprocess.run(["scancel", jobid], env=cluster, check=True, timeout=30)
                            cancelled = {"jobid": jobid, "comment": comment, "env": job_env,
                                         "at": time.monotonic() - started}
                            print(f"[test] scancel {jobid} ({comment}) at {cancelled['at']:.0f} s")
                            break
                time.sleep(0.5)
            if process.poll() is None:
                process.kill()
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    wall = time.monotonic() - started
    text = log_path.read_text()
    print(f"[test] Slurm run ({'with' if ACCOUNTING else 'without'} accounting): exit status "
          f"{process.returncode} after {wall:.0f} s")
    if cancelled and ACCOUNTING:
        cancelled["sacct"] = subprocess.run(
            ["sacct", "-X", "-n", "--parsable2", "-o", "State", "-j", cancelled["jobid"]], env=cluster,
            capture_output=True, text=True, timeout=30).stdout.strip()
    return {"local": local / "results", "slurm": work / "results", "log": text, "work": work,
            "returncode": process.returncode, "cancelled": cancelled, "wall": wall}


def sbatch_calls(log):
    return [line.split("sbatch call: ", 1)[1] for line in log.splitlines() if "sbatch call: " in line]


def shown(call):
    """An sbatch call without its --wrap payload (the Snakemake command line of the job)."""
    return call.split(' --wrap="', 1)[0] + ' --wrap="..."'


def cancel_transcript(log, cancelled):
    """The log lines about the cancelled chunk: submissions, the failure, the retry."""
    comment, jobid = cancelled["comment"], cancelled["jobid"]
    chunk_dir = comment.removeprefix("rule_score_masks_wildcards_")
    lines = log.splitlines()
    keep = []
    for number, line in enumerate(lines):
        if "sbatch call: " in line and f"--comment {comment} " in line:
            keep.append(shown(line))
        elif "has been submitted with SLURM jobid" in line and f"/{chunk_dir}/" in line:
            keep.append(line)
        elif f"SLURM-job '{jobid}' failed" in line:
            keep.extend(lines[max(0, number - 1):number + 1])
        elif line.startswith("Trying to restart job") or ("Finished jobid" in line and chunk_dir in line):
            keep.append(line)
    return "\n".join(keep)


def tiny_mem_mb(model_dir):
    """rules/resources.smk's estimate, from the saved weights' real parameter count."""
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:
        parameters = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
    return 1000 * math.ceil((4000 + 1.5 * parameters * 4 / 1e6) / 1000)


def test_the_run_completes_after_a_cancelled_job(runs):
    assert runs["returncode"] == 0, runs["log"][-6000:]
    assert runs["cancelled"] is not None, "no score_masks job was seen running:\n" + runs["log"][-3000:]
    jobid = runs["cancelled"]["jobid"]
    assert f"SLURM-job '{jobid}' failed, SLURM status is: 'CANCELLED'" in runs["log"]
    if ACCOUNTING:  # what the plugin's default status command would have seen (and waited on)
        assert runs["cancelled"]["sacct"] == "CANCELLED by 0", runs["cancelled"]
        print(f"[test] sacct says: {runs['cancelled']['sacct']}")
    # the cancelled chunk was submitted twice: attempt 1, then attempt 2 with 2x memory and time,
    # capped by HEADLOC_MAX_MEM_MB and HEADLOC_MAX_RUNTIME
    chunk = [call for call in sbatch_calls(runs["log"])
             if f"--comment {runs['cancelled']['comment']} " in call]
    assert len(chunk) == 2, chunk
    first, retry = (dict(re.findall(r" (--mem|-t) (\S+)", call)) for call in chunk)
    assert int(first["--mem"]) < MAX_MEM_MB and first["-t"] == str(EVAL_RUNTIME)
    assert retry == {"--mem": str(MAX_MEM_MB), "-t": str(MAX_RUNTIME)}
    print(f"[test] scancel {jobid}; the log about that chunk:\n"
          + cancel_transcript(runs["log"], runs["cancelled"]))


def test_compute_jobs_see_the_submitters_offline_settings(runs):
    env = runs["cancelled"] and runs["cancelled"]["env"]
    assert env, "the cancelled job's processes could not be read"
    assert env.get("HF_HUB_OFFLINE") == "1" and env.get("HF_DATASETS_OFFLINE") == "1"


def test_sbatch_asks_for_what_the_profile_says(runs, tiny_model_dir):
    calls = sbatch_calls(runs["log"])
    cpu = [call for call in calls if "--comment rule_make_masks_" in call]
    gpu = [call for call in calls if "--comment rule_score_masks_" in call]
    validate = [call for call in calls if "--comment rule_validate_headset_" in call]
    assert cpu and gpu and validate, calls
    for call in cpu:
        assert "--cpus-per-task=1" in call and "--gpus" not in call and "--cpus-per-gpu" not in call
        assert " -p cpu " in call and " --mem 8000 " in call and " -t 60 " in call  # default partition
        # the account from SBATCH_ACCOUNT; none without it (sbatch's default account)
        assert (f" -A {ACCOUNT} " in call) if ACCOUNTING else (" -A " not in call)
    expected_mem = tiny_mem_mb(tiny_model_dir)
    for call in gpu[:1] + validate:
        assert "--gpus=1" in call and "--cpus-per-gpu=4" in call and "--cpus-per-task" not in call
        assert " -p gpu " in call and f" --mem {expected_mem} " in call and f" -t {EVAL_RUNTIME} " in call
        assert (f" -A {ACCOUNT} " in call) if ACCOUNTING else (" -A " not in call)
    print(f"[test] CPU rule: {shown(cpu[0])}\n[test] GPU rule: {shown(gpu[0])}")


def test_results_are_byte_identical_to_a_local_run(runs):
    assert runs["returncode"] == 0
    local, slurm = runs["local"], runs["slurm"]
    files = compared(local)
    assert files == compared(slurm)
    kinds = {p.suffix for p in files}
    assert {".jsonl", ".npy", ".tsv", ".json", ".md", ".csv"} <= kinds, kinds
    assert any(p.parts[-2] == "scores" for p in files) and any("evals" in p.parts for p in files)
    different = [str(p) for p in files if (local / p).read_bytes() != (slurm / p).read_bytes()]
    assert different == []
