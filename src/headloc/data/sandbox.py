"""Run model-written Python (mbpp, humaneval) contained: the human-eval recipe plus audit hooks.

``run_program(program)`` executes one program and says whether it passed. It is used only when a
task's config opts in with ``allow_code_execution: true``. The layers, and why each is there (the
child sets up 4 and 6: :mod:`headloc.data.sandbox_child`):

1. **A fresh interpreter per program** (``sys.executable -I``): a crash, a monkeypatched builtin or
   an exhausted heap dies with the program, never touches the evaluator. ``-I`` ignores
   ``PYTHON*`` variables, the user site and the current directory on ``sys.path``.
2. **A fresh temporary directory** as working directory, ``HOME`` and ``TMPDIR``, removed
   afterwards (the program is written there as ``program.py``). Relative writes land there.
3. **An empty environment**: an allow-list (``PATH``, ``HOME``, ``TMPDIR``, ``LANG``/``LC_ALL``,
   one-thread BLAS), nothing inherited, so tokens and keys in our environment cannot leak.
4. **Resource limits set in the child** before the program runs: ``RLIMIT_AS`` (``memory_mb``, so a
   huge allocation raises ``MemoryError`` in the child instead of exhausting the machine),
   ``RLIMIT_CPU`` (the timeout, a backstop), ``RLIMIT_FSIZE`` (``file_mb``, also caps what it can
   print, since output goes to files), ``RLIMIT_NOFILE`` and ``RLIMIT_CORE=0``. ``RLIMIT_NPROC``
   is *not* set: it counts every process of the user (or is ignored for root), so a value small
   enough to matter breaks unrelated jobs; forks are refused by the guard instead.
5. **A wall-clock timeout** that kills the whole process group (``start_new_session=True``,
   ``os.killpg``), and the group is killed after a normal exit too, so nothing outlives the run.
6. **An audit-hook guard** (``sys.addaudithook``, PEP 578), installed before the program's first
   line; an audit hook cannot be removed. It refuses: file writes, removals, renames, ``chmod``
   and friends outside the directory (``/dev/null`` and the program's own stdout/stderr aside);
   ``chdir`` out of it; symlinks and hard links; processes (``fork``, ``exec``, ``subprocess``,
   ``os.system``, ``posix_spawn``, signals to other processes; ``_posixsubprocess.fork_exec``,
   which raises no event, is replaced by a refusal, and re-importing that module is refused);
   non-Unix sockets, name lookups and any ``connect``/``bind``/``sendto``; ``ctypes`` beyond
   loading the interpreter itself (numpy does that on import); other processes' ``/proc``
   entries (their environment); ``gc`` object walks; raising resource limits; sub-interpreters.
   On a refusal the hook writes ``headloc-sandbox: blocked <event> <detail>`` to stderr and ends
   the process at once with exit code 113 (``os._exit``): there is no exception for the program
   to catch and carry on after. The hook holds its own references to the C functions it calls,
   so monkeypatching ``os`` or ``builtins`` does not change its decisions. Reading files is
   allowed: programs need the standard library; secrets are kept out by the empty environment.

What it does NOT protect against: it is not a VM, container or seccomp filter, and it runs as the
same user (dropping to ``nobody`` needs an interpreter that user can read; ours is under /root).
A program determined to escape can: import a native extension it writes into its directory, or
load a second copy of ``_posixsubprocess`` with ``importlib.util.module_from_spec`` (no audit
event covers either); swap a path between the check and the system call with a
``__fspath__`` that answers differently each time; read any file the user can read (keys on disk);
exhaust the machine's disk below ``file_mb`` per file by writing many files; or exploit a
CPython/kernel bug. Scoring is the caller's: a program that calls ``sys.exit(0)`` before the
tests run passes, exactly as in human-eval. It contains the accidents model-written code
actually has (loops, huge allocations, ``rm``-like cleanup, stray subprocesses, network calls),
which is what human-eval's ``reliability_guard`` targets; untrusted *adversarial* code belongs in
a real sandbox (gVisor, nsjail, a throwaway VM).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass

from headloc.data import sandbox_child
from headloc.data.sandbox_child import BLOCKED_MARKER

#: Characters of stdout/stderr kept (the tail).
OUTPUT_CHARS = 4000

_ENV_KEEP = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin",
             "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class ProgramResult:
    """What one run did. ``passed`` means: exit code 0, within the limits, nothing refused."""

    passed: bool
    returncode: int | None
    timed_out: bool
    blocked: str | None
    stderr: str
    stdout: str = ""


def run_program(program: str, *, timeout: float = 10.0, memory_mb: int = 1024,
                file_mb: int = 16) -> ProgramResult:
    """Run ``program`` (Python source) contained as the module docstring describes.

    ``timeout`` is wall-clock seconds; ``memory_mb`` the address-space limit (``RLIMIT_AS``);
    ``file_mb`` the largest file it may write, its output included.
    """
    import select
    import signal
    import subprocess

    if not isinstance(program, str):
        raise TypeError(f"program must be a str of Python source, got {type(program).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    for name, value, low in (("memory_mb", memory_mb, 128), ("file_mb", file_mb, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

    with tempfile.TemporaryDirectory(prefix="headloc-sandbox-") as tmp, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        root = os.path.realpath(tmp)
        with open(os.path.join(root, "program.py"), "w", encoding="utf-8") as f:
            f.write(program)
        env = dict(_ENV_KEEP, HOME=root, TMPDIR=root)
        cmd = [sys.executable, "-I", os.path.abspath(sandbox_child.__file__), root, str(memory_mb << 20),
               str(math.ceil(timeout) + 1), str(file_mb << 20)]
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True, close_fds=True)
        timed_out = False
        pidfd = os.pidfd_open(proc.pid)
        try:
            # Wait for the exit without reaping, so the group id cannot be reused before killpg.
            timed_out = not select.select([pidfd], [], [], timeout)[0]
        finally:
            os.close(pidfd)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            returncode = proc.wait()
        stdout, stderr = _tail(out), _tail(err)
    blocked = None
    for line in stderr.splitlines():
        if line.startswith(BLOCKED_MARKER):
            blocked = line[len(BLOCKED_MARKER):]
    if timed_out:
        returncode = None
    passed = returncode == 0 and not timed_out and blocked is None
    return ProgramResult(passed, returncode, timed_out, blocked, stderr, stdout)


def _tail(f) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - 4 * OUTPUT_CHARS))
    return f.read().decode("utf-8", "replace")[-OUTPUT_CHARS:]
