"""Jobs forked from a warm interpreter (headloc.workflow.warm): a script that calls run_warm(), as
every workflow script does, run as a process the way Snakemake runs a job. Its output, exit status,
directory, environment and signals must be a cold run's; a child whose launcher is killed must
stop; headloc's modules come from disk, not from the server."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headloc.workflow.warm import address, address_of, send_job, wait_for_server

SRC = Path(__file__).resolve().parents[2] / "src"

SCRIPT = '''\
import os, random, sys, time
from headloc.workflow.warm import run_warm

run_warm()
import headloc.workflow, numpy, torch
print("pid", os.getpid(), "parent", os.getppid(), "cwd", os.getcwd(), "colour", os.environ.get("COLOUR"),
      "oldpwd", os.environ.get("OLDPWD"), "stamp", getattr(headloc.workflow, "STAMP", None),
      "draws", f"{random.getrandbits(32)},{numpy.random.randint(2**31)}", "torch", torch.initial_seed(),
      "args", *sys.argv[1:], flush=True)
print("on stderr", file=sys.stderr)
if sys.argv[1:] == ["fail"]:
    raise RuntimeError("the job failed")
if sys.argv[1:] == ["exit"]:
    sys.exit(3)
if sys.argv[1:] == ["sleep"]:
    time.sleep(20)
    open("woke", "w").write("the child outlived its launcher")
'''


def environment(tmp_path, **extra):
    # a package copy of its own, first on the path: the test can change headloc's code on disk
    return {**os.environ, "HEADLOC_WARM_JOBS": "1", "PYTHONPATH": str(tmp_path / "src"), "COLOUR": "teal",
            "TMPDIR": str(tmp_path), **extra}


def job(tmp_path, *args, env, cwd=None, background=False):
    command = [sys.executable, str(tmp_path / "job.py"), *args]
    if background:
        return subprocess.Popen(command, env=env, cwd=cwd or tmp_path, stdout=subprocess.PIPE, text=True)
    return subprocess.run(command, env=env, cwd=cwd or tmp_path, capture_output=True, text=True, timeout=120)


def fields(output: str) -> dict:
    words = output.split("\n")[0].split()
    return dict(zip(words[::2], words[1::2]))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("warm")
    shutil.copytree(SRC / "headloc", tmp_path / "src" / "headloc", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "job.py").write_text(SCRIPT)
    env = environment(tmp_path)
    first = job(tmp_path, "ok", env=env)
    assert first.returncode == 0, first.stderr
    assert fields(first.stdout)["parent"] == str(os.getpid())  # no server yet: it ran cold, in its launcher
    wait_for_server(env, 120)
    return tmp_path, env, first


def test_a_warm_job_prints_and_exits_as_a_cold_one(warm):
    tmp_path, env, _ = warm
    again = job(tmp_path, "ok", env=env)
    assert again.returncode == 0
    seen = fields(again.stdout)
    assert seen["parent"] != str(os.getpid())  # the server forked it
    assert seen["colour"] == "teal" and seen["args"] == "ok" and seen["cwd"] == str(tmp_path)
    assert again.stderr == "on stderr\n"
    failed = job(tmp_path, "fail", env=env)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == "RuntimeError: the job failed"
    assert "warm_server" not in failed.stderr  # the traceback starts at the script, as a cold one
    assert 'job.py", line 12' in failed.stderr
    assert job(tmp_path, "exit", env=env).returncode == 3


def test_the_job_runs_in_its_own_directory_with_its_environment(warm, tmp_path):
    root, env, _ = warm
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # OLDPWD and pytest-xdist's worker name: the same server
    seen = fields(job(root, "x", env={**env, "OLDPWD": str(root), "PYTEST_XDIST_WORKER": "gw7"}, cwd=elsewhere).stdout)
    assert seen["cwd"] == str(elsewhere) and seen["oldpwd"] == str(root) and seen["parent"] != str(os.getpid())


def test_each_job_draws_as_a_fresh_process(warm):
    """Python's, NumPy's and torch's generators seeded anew in each child, as in a new process (not
    from the server's state, which all children would share)."""
    tmp_path, env, cold = warm
    runs = [fields(job(tmp_path, "ok", env=env).stdout) for _ in range(2)] + [fields(cold.stdout)]
    assert len({run["draws"] for run in runs}) == 3 and len({run["torch"] for run in runs}) == 3


def test_headloc_modules_come_from_disk(warm):
    tmp_path, env, _ = warm
    package = tmp_path / "src" / "headloc" / "workflow" / "__init__.py"
    original = package.read_text()
    try:
        package.write_text(original + "\nSTAMP = 'edited'\n")
        assert fields(job(tmp_path, "ok", env=env).stdout)["stamp"] == "edited"
    finally:
        package.write_text(original)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_ends_the_job_the_same_way(warm, sig):
    tmp_path, env, _ = warm
    launcher = job(tmp_path, "sleep", env=env, background=True)
    child = int(fields(launcher.stdout.readline() + "\n")["pid"])
    launcher.send_signal(sig)
    assert launcher.wait(timeout=30) == -sig
    time.sleep(0.5)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_a_killed_launcher_takes_its_child_with_it(warm):
    tmp_path, env, _ = warm
    launcher = job(tmp_path, "sleep", env=env, background=True)
    child = int(fields(launcher.stdout.readline() + "\n")["pid"])
    launcher.kill()
    launcher.wait(timeout=30)
    wait_until_gone(child, "the child outlived its launcher")
    assert not (tmp_path / "woke").exists()


@pytest.mark.parametrize("extra", [{"HEADLOC_WARM_JOBS": "0"}, {"SLURM_JOB_ID": "7"}])
def test_off_or_under_slurm_the_job_runs_in_its_launcher(warm, extra):
    tmp_path, env, _ = warm
    env = {**env, **extra}
    launcher = job(tmp_path, "sleep", env=env, background=True)
    seen = fields(launcher.stdout.readline() + "\n")
    launcher.kill()
    launcher.wait(timeout=30)
    assert seen["pid"] == str(launcher.pid)
    assert not os.path.exists(address_of(env) + ".log")  # nor did it start a server


def test_another_environment_gets_another_server(warm):
    tmp_path, env, _ = warm
    path = address_of({**env, "COLOUR": "red"})
    assert path != wait_for_server(env, 120)
    assert path != address()  # nor this process's


# A job as Snakemake starts one: its preamble puts a folder on sys.path (Snakemake's copy of the
# workflow's sources, a new folder every run) before the script asks for a server.
RUN_SCRIPT = '''\
import os, sys
sys.path.append(sys.argv[1])
from headloc.workflow.warm import CHILD, address, run_warm

if CHILD not in os.environ:
    print("address", address(), flush=True)
run_warm()
print("parent", os.getppid(), flush=True)
'''


def test_every_run_of_a_workflow_is_served_by_one_server(warm):
    """Each Snakemake run's copy of the sources lies in a folder of its own; the jobs of the next run
    fork from the server the first run started, and another folder on the path is another server."""
    tmp_path, env, _ = warm
    (tmp_path / "run_job.py").write_text(RUN_SCRIPT)

    def run(folder):
        done = subprocess.run([sys.executable, str(tmp_path / "run_job.py"), str(tmp_path / folder)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return fields(done.stdout.replace("\n", " "))

    cache = "snakemake-runtime-cache/{}/file/work/rules/../scripts"
    first = run(cache.format("tmpa1b2c3d4"))
    assert first["parent"] == str(os.getpid())  # the run's first job: no server for it yet
    deadline = time.monotonic() + 120
    while not os.path.exists(first["address"]):
        assert time.monotonic() < deadline, "the first job started no server"
        time.sleep(0.2)
    second = run(cache.format("tmpe5f6g7h8"))  # the next run of the same workflow
    assert second["address"] == first["address"]
    assert second["parent"] != str(os.getpid())  # served
    other = run("another-workflow/scripts")
    assert other["address"] != first["address"]


def handed_over(path, script, *, go: bool) -> int:
    """Hand ``script`` to the server at ``path`` as run_warm() does, then send the go-ahead or (a
    launcher that gave up waiting and runs the job cold itself) close the connection instead; the
    child's pid."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn, open(os.devnull, "r+") as null:
        conn.connect(path)
        send_job(conn, [str(script)], [null.fileno()] * 3)
        pid = int(conn.makefile().readline())
        if go:
            conn.sendall(b"g")
            assert conn.makefile().readline() == "0\n"  # its exit status, once it ended
    return pid


def wait_until_gone(pid: int, why: str) -> None:
    """Until process ``pid`` has ended (or is a zombie), at most 10 s."""
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline, why
        time.sleep(0.1)


def test_a_launcher_that_gave_up_never_runs_beside_its_child(warm, tmp_path, monkeypatch):
    """The child runs the script only after its launcher's go-ahead: a launcher that gave up (and
    runs the job cold) and the child never both run it."""
    _, env, _ = warm
    monkeypatch.chdir(tmp_path)  # the child's directory, where the script writes
    (tmp_path / "touch.py").write_text("open('ran', 'a').write('once')\n")
    handed_over(wait_for_server(env, 120), tmp_path / "touch.py", go=True)
    assert (tmp_path / "ran").read_text() == "once"
    (tmp_path / "ran").unlink()
    child = handed_over(wait_for_server(env, 120), tmp_path / "touch.py", go=False)
    wait_until_gone(child, "the child went on without its launcher's go-ahead")
    assert not (tmp_path / "ran").exists()


def test_the_benchmark_times_a_job_both_ways(tiny_model_dir, tmp_path):
    """benchmarks/warm_jobs.py's measure on the tiny model: every launch timed, the warm ones (a fork,
    no imports) at most half the cold ones (each imports torch, transformers and lm-eval)."""
    from headloc.benchmarks.warm_jobs import compare

    found = compare(str(tiny_model_dir), 2, tmp_path)
    assert [len(found[way]["seconds"]) for way in ("cold", "warm")] == [2, 2]
    assert found["warm"]["mean"] < found["cold"]["mean"] / 2
    assert found["ratio"] == pytest.approx(found["warm"]["mean"] / found["cold"]["mean"])
