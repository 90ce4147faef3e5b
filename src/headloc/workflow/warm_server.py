"""The warm server of :mod:`headloc.workflow.warm`: it imports what the workflow's scripts spend
their start on, then forks a child per job (which becomes that job: its streams, directory,
environment, fresh headloc modules and random generators) until idle. Started by
:func:`headloc.workflow.warm.run_warm` as ``python -m headloc.workflow.warm_server SOCKET PATH``.
Standard library only until it preloads.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import sys
import time

from headloc.workflow.warm import CHILD, FORWARDED, IDLE, PRELOAD


def serve(path: str) -> None:
    """The server: preload, then fork a child per request until idle for :data:`IDLE` seconds."""
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another server holds it
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception as error:  # noqa: BLE001 (a package absent or broken: its jobs import it themselves)
            print(f"not preloaded: {name}: {error}", file=sys.stderr)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        print("CUDA was initialised by the imports: a forked child could not use it; not serving", file=sys.stderr)
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    listener.listen(64)
    os.replace(staging, path)
    mine = os.stat(path).st_ino
    jobs: dict[int, socket.socket] = {}
    last = time.monotonic()
    try:
        while jobs or time.monotonic() - last < IDLE:
            if select.select([listener], [], [], 0.05)[0]:
                conn, _ = listener.accept()
                last = time.monotonic()
                _fork(conn, listener, lock, jobs)
            if _reap(jobs):
                last = time.monotonic()
    finally:
        if os.path.exists(path) and os.stat(path).st_ino == mine:
            os.unlink(path)


def _reap(jobs: dict) -> bool:
    """Tell each ended child's launcher its exit status (negative: the signal); whether any ended."""
    ended = False
    for pid in list(jobs):
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            continue
        ended = True
        conn = jobs.pop(pid)
        try:
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass  # the launcher is gone: its child was killed with it
        conn.close()
    return ended


def _fork(conn: socket.socket, listener: socket.socket, lock: int, jobs: dict) -> None:
    try:
        conn.settimeout(5)
        message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        size = int.from_bytes(message[:8], "big")
        body = message[8:]
        while len(body) < size:
            chunk = conn.recv(1 << 16)
            if not chunk:
                raise OSError("request cut short")
            body += chunk
        request = json.loads(body)
    except (OSError, ValueError) as error:
        print(f"request refused: {error}", file=sys.stderr)
        conn.close()
        return
    pid = os.fork()
    if pid == 0:  # the child holds only its own job's connection
        listener.close()
        os.close(lock)
        for other in jobs.values():
            other.close()
        _child(conn, request, fds)
    for fd in fds:
        os.close(fd)
    jobs[pid] = conn


def _child(conn: socket.socket, request: dict, fds: list) -> None:
    """Become the job (see the module docstring); never returns."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in FORWARDED[1:]:
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"], **{CHILD: "1"})
    script = request["argv"][0]
    sys.argv = request["argv"]
    sys.path[:] = [os.path.dirname(os.path.abspath(script)), *request["path"][1:]]
    for name in [name for name in sys.modules if name == "headloc" or name.startswith("headloc.")]:
        del sys.modules[name]  # the code on disk, as a cold job imports it
    _fresh_generators()
    _die_with(request["launcher"])
    conn.settimeout(30)
    try:
        conn.sendall(f"{os.getpid()}\n".encode())
        if conn.recv(1) != b"g":
            os._exit(0)
    except OSError:
        os._exit(0)
    conn.close()
    os._exit(_run(script))


def _fresh_generators() -> None:
    """Random generators as a fresh process has them: Python's, NumPy's and torch's global ones
    seeded from the system, not the server's state, which every child would share."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def _die_with(launcher: int) -> None:
    """Kill this child when its launcher ends (a job killed with SIGKILL)."""
    import threading

    try:
        handle = os.pidfd_open(launcher)
    except ProcessLookupError:
        os._exit(1)

    def watch():
        select.select([handle], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def _run(script: str) -> int:
    """Run the script as ``__main__``: its exit code, as the interpreter would give it."""
    import atexit
    import runpy

    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:
            print(done.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt as error:
        _traceback(error, script)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException as error:  # noqa: BLE001 (whatever ends a script ends its job with a traceback)
        _traceback(error, script)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _traceback(error: BaseException, script: str) -> None:
    """The traceback a cold job prints: from the script's own frame on."""
    import traceback

    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename != script:
        frames = frames.tb_next
    traceback.print_exception(type(error), error, frames or error.__traceback__)
    sys.stderr.flush()


if __name__ == "__main__":
    sys.path[:] = json.loads(sys.argv[2])
    serve(sys.argv[1])
