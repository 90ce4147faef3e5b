"""Jobs forked from a warm interpreter (``HEADLOC_WARM_JOBS=1``): a job's script, rather than
import torch, transformers and lm-eval itself (about 6.5 s of a small job's 7 on a 2-core CPU,
docs/performance.md), asks a server process that imported them once
(:mod:`headloc.workflow.warm_server`) to fork a child, and the child runs the script. It pays where jobs are many and small (the test suite's tiny models); on
a real model a job's minutes dwarf its imports, so it is off unless asked for.

What a child keeps of a cold job: the script file (the process's ``sys.argv[0]``), working
directory, environment, arguments and ``sys.path``, standard streams (their file descriptors are
passed over the socket), its exit status or the signal that ended it, and the signals its
launcher gets (SIGINT, SIGTERM, ... are forwarded); a child whose launcher dies (SIGKILL) is
killed at once. headloc's own modules are imported afresh in every child, so that a job runs the
code on disk; the random generators start as in a fresh process. A server serves one environment
only (its socket is named by the interpreter, ``sys.path``, every environment variable and the
installed packages' folder), is started by the first job that finds none (which runs cold), and
exits after :data:`IDLE` seconds without a job. What differs: Snakemake's ``benchmark:`` files
measure the launcher, not the child. Off under Slurm (one job per allocation) and where the
imports would have initialised CUDA (a forked child could not use it). Standard library only.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

SWITCH = "HEADLOC_WARM_JOBS"  # "1": jobs run warm
CHILD = "HEADLOC_WARM_CHILD"  # set in a child: its script runs there, not forwarded again
IDLE = 60  # seconds a server waits for its next job
# imported once by the server: what the workflow's scripts spend their start on
PRELOAD = ("numpy", "torch", "transformers", "transformers.models.llama.modeling_llama",
           "transformers.models.qwen2.modeling_qwen2", "lm_eval", "lm_eval.evaluator", "lm_eval.tasks",
           "lm_eval.models.huggingface", "sklearn.linear_model", "sklearn.model_selection", "pandas", "scipy.stats",
           "matplotlib.pyplot", "gguf", "snakemake.iocontainers", "snakemake.logging")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# what names the moment, not the environment: the shell's, pytest's current test and (the test
# suite's two workers share a server) pytest-xdist's worker
_UNKEYED = {"PWD", "OLDPWD", "SHLVL", "_", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER"}


def wanted() -> bool:
    """Whether this process should hand its script to a warm server."""
    return (os.environ.get(SWITCH) == "1" and CHILD not in os.environ and "SLURM_JOB_ID" not in os.environ
            and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds"))


# Snakemake puts a copy of the workflow's sources on a job's sys.path in a folder new to every run
# (.../snakemake-runtime-cache/tmpXXXXXXXX/...): keyed as it is, every run of a workflow would start
# a server of its own (a cold first job, then a fresh import of torch, transformers and lm-eval).
# The child takes the job's own sys.path, so the folder's name changes nothing it imports.
_RUNTIME_CACHE = re.compile(r"(snakemake-runtime-cache)/tmp[^/]+")


def _run_free(entry: str) -> str:
    """A sys.path entry without the name of a Snakemake run's source-cache folder."""
    return _RUNTIME_CACHE.sub(r"\1/<run>", entry)


def address() -> str:
    """The socket of the server for this interpreter, path and environment."""
    site = sysconfig.get_paths()["purelib"]
    parts = [sys.executable, *map(_run_free, sys.path[1:]), str(os.stat(site).st_mtime_ns)]
    parts += sorted(f"{key}={value}" for key, value in os.environ.items() if key not in _UNKEYED)
    name = f"headloc-warm-{os.getuid()}/{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:20]}.sock"
    path = os.path.join(tempfile.gettempdir(), name)
    if len(path) > 90:  # a socket's path has at most 107 bytes (the server binds it with a suffix first)
        path = os.path.join("/tmp", name)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return path


def address_of(env: dict) -> str:
    """The socket a job with environment ``env`` (this interpreter) would use, worked out in a process
    of its own: the key holds ``sys.path``, which ``PYTHONPATH`` in ``env`` changes."""
    where = [sys.executable, "-c", "from headloc.workflow.warm import address; print(address())"]
    return subprocess.run(where, env=env, check=True, capture_output=True, text=True).stdout.strip()


def wait_for_server(env: dict, timeout: float) -> str:
    """The socket of ``env``'s server once it serves; TimeoutError after ``timeout`` seconds."""
    path = address_of(env)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no warm server at {path} after {timeout:g} s (its log: {path}.log)")
        time.sleep(0.2)
    return path


def run_warm() -> None:
    """Run this process's script in a child of the warm server and exit as the child did; return
    (and let the script run here) when warm jobs are off, or no server is ready (one is started)."""
    if not wanted():
        return
    path = address()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(2)
        conn.connect(path)
        send_job(conn, sys.argv, [0, 1, 2])
        conn.settimeout(30)
        pid = int(_line(conn))
        conn.sendall(b"g")  # the child runs only once told to: until then a cold run cannot overlap it
    except (OSError, ValueError):
        conn.close()
        _start_server(path)  # unless one is starting or serving (a stale socket is replaced)
        return
    for sig in FORWARDED:
        signal.signal(sig, lambda number, frame: _send(pid, number))
    conn.settimeout(None)
    status = _line(conn)
    sys.stdout.flush()
    sys.stderr.flush()
    if not status:
        print(f"headloc: the warm job server ({path}) ended without job {pid}'s exit status", file=sys.stderr)
        os._exit(1)
    code = int(status)
    if code < 0:  # ended by a signal: end the same way, as a cold job would have
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(5)
    os._exit(code if code >= 0 else 128 - code)


def send_job(conn: socket.socket, argv: list, streams: list) -> None:
    """Ask the server on ``conn`` for a child that runs ``argv`` in this process's directory,
    environment and ``sys.path``, with ``streams`` (three file descriptors) as its 0, 1 and 2."""
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path,
                          "launcher": os.getpid()}).encode()
    socket.send_fds(conn, [len(request).to_bytes(8, "big") + request], streams)


def _send(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def _line(conn: socket.socket) -> str:
    """One newline-ended message (empty at end of stream)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(64)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def _start_server(path: str) -> None:
    """Start a server for ``path`` in the background, unless one is starting (it holds the lock)."""
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    finally:
        os.close(lock)
    with open(path + ".log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "headloc.workflow.warm_server", path, json.dumps(sys.path[1:])],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
