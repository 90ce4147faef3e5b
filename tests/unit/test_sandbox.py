"""headloc.data.sandbox: hostile programs are contained and scored as failures; honest ones pass."""

from __future__ import annotations

import os
import time

import pytest

from headloc.data.sandbox import OUTPUT_CHARS, ProgramResult, run_program
from headloc.data.sandbox_child import BLOCKED_EXIT


def failed(result: ProgramResult) -> ProgramResult:
    assert result.passed is False, result
    return result


# --- honest programs ------------------------------------------------------------------------


def test_a_correct_program_passes_and_its_output_is_captured():
    program = "def add(a, b):\n    return a + b\nassert add(2, 3) == 5\nprint('ok')"
    result = run_program(program, timeout=3)
    assert result == ProgramResult(True, 0, False, None, "", "ok\n")


def test_a_failing_assert_fails_with_its_traceback():
    result = failed(run_program("assert sorted([3, 1]) == [3, 1], 'unsorted'", timeout=3))
    assert result.returncode == 1 and not result.timed_out and result.blocked is None
    assert 'File "program.py", line 1' in result.stderr
    assert "AssertionError: unsorted" in result.stderr
    assert "sandbox_child.py" not in result.stderr  # the program's traceback, not the wrapper's


def test_a_syntax_error_fails():
    result = failed(run_program("def f(:\n    pass", timeout=3))
    assert result.returncode == 1 and "SyntaxError" in result.stderr


def test_sys_exit_status_is_the_result():
    assert run_program("import sys; sys.exit(0)", timeout=3).passed is True
    assert failed(run_program("raise SystemExit(4)", timeout=3)).returncode == 4


def test_files_inside_the_temp_dir_are_allowed_and_the_dir_is_removed_afterwards():
    program = (
        "import os, shutil, tempfile\n"
        "assert os.environ['HOME'] == os.environ['TMPDIR'] == os.getcwd()\n"
        "open('out.txt', 'w').write('x' * 10)\n"
        "os.makedirs('a/b'); open('a/b/c', 'w').write('y'); os.rename('a/b/c', 'a/d')\n"
        "shutil.rmtree('a')\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    open(os.path.join(d, 'f'), 'w').write('z')\n"
        "print(os.getcwd())\n"
    )
    result = run_program(program, timeout=3)
    assert result.passed, result
    workdir = result.stdout.strip()
    assert os.path.basename(workdir).startswith("headloc-sandbox-")
    assert not os.path.exists(workdir)


def test_ordinary_libraries_still_work():
    """numpy loads ctypes on import (dlopen of the interpreter itself); asyncio imports subprocess
    and makes a socketpair; threads, sqlite in memory and reading the stdlib are all allowed."""
    program = (
        "import numpy as np\nassert int(np.arange(4).sum()) == 6\n"
        "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    return 3\n"
        "assert asyncio.run(f()) == 3\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(2) as pool:\n    assert list(pool.map(abs, [-1, -2])) == [1, 2]\n"
        "import sqlite3\ndb = sqlite3.connect(':memory:')\n"
        "assert db.execute('select 1').fetchone() == (1,)\n"
        "import collections, heapq, re, random, hashlib, json, uuid, logging, platform\n"
        "assert open(re.__file__).read()\n"
        "import os, sys\nprint('quiet', file=open(os.devnull, 'w'))\n"
        "print('to stderr', file=open('/dev/stderr', 'w'), flush=True)\n"
    )
    result = run_program(program, timeout=20)
    assert result.passed, result
    assert result.stderr == "to stderr\n"


# --- hostile programs: each contained and scored as a failure -------------------------------


def test_an_infinite_loop_is_killed_at_the_timeout_with_its_process_group():
    start = time.monotonic()
    result = failed(run_program("import os\nprint(os.getpid(), flush=True)\nwhile True:\n    pass",
                                timeout=1))
    elapsed = time.monotonic() - start
    assert result.timed_out and result.returncode is None
    assert elapsed < 30  # it would never end by itself; the bound only proves it was stopped
    pid = int(result.stdout)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


@pytest.mark.parametrize("program", [
    "x = bytearray(10 * 1024 ** 3)",  # 10 GB at once
    "x = []\nwhile True:\n    x.append(bytearray(10 ** 7))",  # growth, 10 MB a step
])
def test_a_huge_allocation_raises_memory_error_inside_the_child(program):
    result = failed(run_program(program, timeout=3, memory_mb=256))
    assert not result.timed_out and result.returncode == 1
    assert "MemoryError" in result.stderr


@pytest.fixture()
def sentinel(tmp_path):
    """A file (in a folder) outside any sandbox directory, which programs try to destroy."""
    folder = tmp_path / "keep"
    folder.mkdir()
    path = folder / "sentinel.txt"
    path.write_text("precious")
    return path


DESTROY = {
    "os.remove": "import os\nos.remove({p!r})",
    "pathlib.unlink": "import pathlib\npathlib.Path({p!r}).unlink()",
    "shutil.rmtree": "import os, shutil\nshutil.rmtree(os.path.dirname({p!r}))",
    "truncate by open(w)": "open({p!r}, 'w').close()",
    "append": "open({p!r}, 'a').write('x')",
    "os.open O_TRUNC": "import os\nos.close(os.open({p!r}, os.O_WRONLY | os.O_TRUNC))",
    "os.rename": "import os\nos.rename({p!r}, 'stolen.txt')",
    "relative ..": "import os\nos.remove(os.path.relpath({p!r}))",
    "symlink then write": "import os\nos.symlink({p!r}, 'link')\nopen('link', 'w').write('x')",
    "hard link then write": "import os\nos.link({p!r}, 'link')\nopen('link', 'w').write('x')",
    "chmod": "import os\nos.chmod({p!r}, 0)",
    "chdir out then remove": (
        "import os\nos.chdir(os.path.dirname({p!r}))\nos.remove('sentinel.txt')"),
    "monkeypatched os.path": (
        "import os, posixpath\nposixpath.realpath = os.path.realpath = lambda p: os.getcwd()\n"
        "os.path.abspath = lambda p: os.getcwd()\nos.remove({p!r})"),
}


@pytest.mark.parametrize("name", DESTROY)
def test_a_file_outside_the_temp_dir_cannot_be_deleted_or_changed(sentinel, name):
    result = failed(run_program(DESTROY[name].format(p=str(sentinel)), timeout=3))
    assert result.returncode == BLOCKED_EXIT and result.blocked
    assert sentinel.read_text() == "precious"
    assert oct(sentinel.stat().st_mode & 0o777) != "0o0"


def test_the_environment_of_the_caller_is_not_visible(monkeypatch):
    monkeypatch.setenv("HEADLOC_SECRET", "hunter2")
    result = failed(run_program("import os\nassert 'HEADLOC_SECRET' in os.environ", timeout=3))
    assert result.returncode == 1 and "AssertionError" in result.stderr
    shown = run_program("import os\nprint(dict(os.environ))", timeout=3)
    assert shown.passed and "hunter2" not in shown.stdout and "HEADLOC_SECRET" not in shown.stdout
    # ... nor through /proc: another process's environ is refused.
    peek = failed(run_program(f"print(open('/proc/{os.getpid()}/environ').read())", timeout=3))
    assert peek.blocked and "environ" in peek.blocked and "hunter2" not in peek.stdout


PROCESSES = {
    "subprocess": ("import subprocess\nsubprocess.run(['true'])", "subprocess.Popen"),
    "_posixsubprocess": ("import _posixsubprocess\n_posixsubprocess.fork_exec([b'/bin/true'])",
                         "_posixsubprocess.fork_exec"),
    "os.system": ("import os\nos.system('touch /tmp/headloc-sandbox-escaped')", "os.system"),
    "os.execv": ("import os\nos.execv('/bin/true', ['true'])", "os.exec"),
    "posix_spawn": ("import os\nos.posix_spawn('/bin/true', ['true'], {})", "os.posix_spawn"),
    "fork bomb": ("import os\nwhile True:\n    os.fork()", "os.fork"),
    "multiprocessing": (
        "import multiprocessing as mp\nmp.Process(target=print).start()", "os.fork"),
    "kill the parent": ("import os\nos.kill(os.getppid(), 9)", "os.kill"),
}


@pytest.mark.parametrize("name", PROCESSES)
def test_processes_cannot_be_started(name):
    program, event = PROCESSES[name]
    result = failed(run_program(program, timeout=3))
    assert not result.timed_out and result.returncode == BLOCKED_EXIT
    assert result.blocked and result.blocked.startswith(event)


NETWORK = {
    "tcp socket": "import socket\nsocket.socket().connect(('127.0.0.1', 9))",
    "dns": "import socket\nsocket.getaddrinfo('example.com', 80)",
    "urllib": "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')",
    "unix connect": "import socket\nsocket.socket(socket.AF_UNIX).connect('/var/run/docker.sock')",
}


@pytest.mark.parametrize("name", NETWORK)
def test_the_network_cannot_be_used(name):
    result = failed(run_program(NETWORK[name], timeout=3))
    assert result.returncode == BLOCKED_EXIT and result.blocked


@pytest.mark.parametrize("program", [
    "import ctypes\nctypes.CDLL('libc.so.6')",
    "import ctypes\nctypes.string_at(id(1), 8)",
    "import gc\ngc.get_objects()",
    "import sys\ndel sys.modules['_posixsubprocess']\nimport _posixsubprocess",
    "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))",
])
def test_escape_hatches_from_the_guard_are_refused(program):
    result = failed(run_program(program, timeout=3))
    assert result.returncode == BLOCKED_EXIT and result.blocked


def test_a_huge_file_is_stopped_by_the_file_size_limit():
    result = failed(run_program("open('big', 'wb').write(b'0' * (64 << 20))", timeout=3, file_mb=4))
    assert result.returncode == 1 and "File too large" in result.stderr


def test_output_is_truncated_to_its_tail():
    result = run_program("for i in range(100000):\n    print(i)", timeout=3)
    assert result.passed and len(result.stdout) <= OUTPUT_CHARS
    assert result.stdout.endswith("99999\n")


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout": 0}, "timeout must be a positive number of seconds, got 0"),
    ({"timeout": float("inf")}, "got inf"),
    ({"memory_mb": 10}, "memory_mb must be an int >= 128, got 10"),
    ({"file_mb": 0.5}, "file_mb must be an int >= 1, got 0.5"),
])
def test_bad_limits_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        run_program("pass", **kwargs)


def test_a_non_string_program_is_a_type_error():
    with pytest.raises(TypeError, match="program must be a str of Python source, got bytes"):
        run_program(b"print(1)")
