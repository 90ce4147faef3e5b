"""The GPU check's section 6 (:mod:`headloc.benchmarks.gpu_check`): one process per visible GPU,
each started as the workflow's evaluating scripts start, must see one GPU no other holds, and one
process more must wait until a first one exits. The jobs are real processes, so what is checked is
the scripts' own claim of a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from headloc.benchmarks.gpu_scores import Report

# an evaluating job's start, as the workflow's scripts make it (the claim's return value dropped);
# it holds its GPU until the file `release` appears
CLAIM = """
import os, sys, time, torch
from headloc.workflow.jobs import start_evaluating_job
start_evaluating_job({log!r}, 1, spread=False)
print("claimed", os.environ.get("CUDA_VISIBLE_DEVICES"), "sees", torch.cuda.device_count(), time.time(), flush=True)
while not os.path.exists({release!r}):
    time.sleep(0.1)
print("released", time.time(), flush=True)
"""
WAIT_SECONDS = 120  # the longest a job's start-up may take here


def claimant(env: dict, folder: Path, name: str) -> subprocess.Popen:
    script = CLAIM.format(log=str(folder / f"{name}.log"), release=str(folder / "release"))
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)


def slot_section(report: Report) -> None:
    """One job per visible GPU, each started as the scripts start: every job sees one GPU and no
    two share one; one job more waits (its log says so) until the first jobs let go."""
    from headloc.model.gpus import visible_gpus

    folder = Path(tempfile.mkdtemp())
    here = str(Path(__file__).resolve().parents[2])  # the folder holding headloc: the jobs import this copy
    env = {**os.environ, "HEADLOC_GPU_LOCKS": str(folder / "locks"),
           "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    env.pop("SLURM_JOB_ID", None)  # the claim of a machine's GPUs, not Slurm's own choice
    gpus = visible_gpus(env)
    holders = [claimant(env, folder, f"job{i}") for i in range(len(gpus))]
    claimed = [holder.stdout.readline().split() for holder in holders]
    extra = claimant(env, folder, "extra")
    waited = waits_for_a_gpu(folder / "extra.log")
    (folder / "release").touch()
    released = [float(holder.stdout.readline().split()[1]) for holder in holders]
    late = extra.stdout.readline().split()
    for process in (*holders, extra):
        process.wait()
    report.say("gpu slot", "visible GPUs", ",".join(gpus))
    report.say("gpu slot", "jobs' GPUs (devices each sees)", " ".join(f"{line[1]} ({line[3]})" for line in claimed))
    distinct = sorted(line[1] for line in claimed) == sorted(gpus) and all(line[3] == "1" for line in claimed)
    report.check("gpu slot", "one GPU each, all of them, none shared", distinct,
                 f"{len(gpus)} jobs on {len(gpus)} GPUs")
    after = float(late[4]) - min(released) if late else float("nan")
    report.check("gpu slot", "one job more waited for a free GPU", waited and after >= 0 and late[1] in gpus,
                 f"its log says it waited: {waited}; claimed {late[1:2]} {after:.1f} s after the first release")


def waits_for_a_gpu(log: Path) -> bool:
    """Whether the job logging to ``log`` says, within WAIT_SECONDS, that it waits for a GPU."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if log.is_file() and "waiting for one to be free" in log.read_text():
            return True
        time.sleep(0.2)
    return False
