"""What a job's start costs, cold and forked from a warm interpreter (:mod:`headloc.workflow.warm`;
benchmarks/warm_jobs.py, docs/results/performance.md#jobs-forked-from-a-warm-interpreter): a
script shaped like the workflow's evaluating jobs (it imports headloc's evaluation stack and loads
a model) is launched as Snakemake launches a job, a fresh ``python`` process, ``n`` times one
after the other each way. The warm way's first launch starts the server and is not timed."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from headloc.workflow.warm import SWITCH, wait_for_server

JOB = '''\
import sys

from headloc.workflow.warm import run_warm

run_warm()
from headloc.engine.evaluation import MaskEvaluator  # noqa: F401 (what an evaluating job imports)
from headloc.model.loading import load_model

model, tokenizer = load_model(sys.argv[1])
print(type(model).__name__, model.config.num_hidden_layers)
'''


def launches(model: str, n: int, warm: bool, folder: Path) -> list[float]:
    """Seconds each of ``n`` launches of the job took, each way in a folder (and so a server) of its own."""
    folder = Path(folder) / ("warm" if warm else "cold")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.py").write_text(JOB)
    env = {**os.environ, SWITCH: "1" if warm else "0", "TMPDIR": str(folder)}
    run = [sys.executable, str(folder / "job.py"), model]
    if warm:
        subprocess.run(run, env=env, check=True, capture_output=True)  # starts the server
        wait_for_server(env, 300)
    seconds = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(run, env=env, check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def compare(model: str, n: int, folder: Path) -> dict:
    """Each way's launches: their mean, standard deviation and every time, in seconds."""
    found = {}
    for way in ("cold", "warm"):
        times = launches(model, n, way == "warm", folder)
        found[way] = {"mean": statistics.mean(times), "sd": statistics.stdev(times) if n > 1 else 0.0,
                      "seconds": [round(t, 3) for t in times]}
    found["ratio"] = found["warm"]["mean"] / found["cold"]["mean"]
    return found
