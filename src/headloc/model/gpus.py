"""One GPU per evaluating job on a machine of several GPUs, without a scheduler that assigns them.

Snakemake's ``--resources gpu=N`` caps how many evaluating jobs (rules with ``gpu=1``) run at once,
but it tells no job *which* GPU to use: each would load its model on ``cuda``, i.e. GPU 0. So an
evaluating job claims a GPU before it touches CUDA (:func:`claim_gpu`): it takes an exclusive lock
(``flock``) on the lock file of the first free GPU and narrows ``CUDA_VISIBLE_DEVICES`` to it, so
``cuda`` and ``cuda:0`` are that GPU for the rest of the job. This module keeps every lock it took
open until the process ends (what :func:`claim_gpu` returns only describes the claim: dropping it
frees nothing), and the kernel releases the lock when the process ends, however it ends (a killed
job frees its GPU). Jobs of other workflows on the same machine take the same locks, so they never
share a GPU either.

Which GPUs: the ones ``CUDA_VISIBLE_DEVICES`` lists when it is set (so ``CUDA_VISIBLE_DEVICES=2,3
snakemake ... --resources gpu=2`` uses GPUs 2 and 3), else every GPU of the machine (one folder each
in /proc/driver/nvidia/gpus, else one line each of ``nvidia-smi -L``).

Under Slurm (``SLURM_JOB_ID`` set) only the GPUs Slurm gave the job count. One visible GPU (a job
the Slurm executor submitted with ``--gpus=1``) is Slurm's choice and is kept unlocked: with cgroup
device constraints every job on a node may see its own GPU as index 0, so a lock named by the index
would make jobs on different GPUs wait for each other. Several visible GPUs (a local run inside an
allocation, e.g. ``salloc --gpus=4``) are claimed like a machine's, with the locks in a folder of
that allocation (``slurm-job-<SLURM_JOB_ID>``), so other allocations on the node never collide.
No ``CUDA_VISIBLE_DEVICES`` under Slurm: the job was given no GPU, and none is claimed.

Lock files live in ``HEADLOC_GPU_LOCKS`` (default: ``headloc-gpu-locks`` in the temporary folder),
one per GPU, named by its ``CUDA_VISIBLE_DEVICES`` entry (an index or a UUID).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

WAIT_SECONDS = 2.0  # between two looks for a free GPU when all are taken
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


@dataclass(frozen=True)
class GpuClaim:
    """A GPU this process holds until it exits: ``gpu`` is its ``CUDA_VISIBLE_DEVICES`` entry,
    ``lock`` its lock file. A description only: the lock itself is held by this module."""

    gpu: str
    lock: Path


# every claim this process made, by lock folder, with its open lock file: held, never closed, so
# the lock lasts as long as the process whatever the caller does with the claim
_HELD: dict[Path, tuple[GpuClaim, object]] = {}


def visible_gpus(environ=os.environ) -> list[str]:
    """The GPUs jobs may claim: ``CUDA_VISIBLE_DEVICES``'s entries, else the machine's GPUs. As CUDA
    reads the variable, an entry that is a negative index (``-1``, the usual way to hide every GPU)
    hides it and every entry after it."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(index) for index in range(machine_gpu_count())]
    gpus = []
    for entry in (entry.strip() for entry in listed.split(",")):
        if not entry or entry.startswith("-"):
            break
        gpus.append(entry)
    return gpus


def machine_gpu_count() -> int:
    """NVIDIA GPUs of this machine: the driver's folders, else the lines of ``nvidia-smi -L``."""
    if NVIDIA_GPUS.is_dir():
        return len(list(NVIDIA_GPUS.iterdir()))
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listing.splitlines())


def lock_folder(environ=os.environ) -> Path:
    """Where the lock files are: ``HEADLOC_GPU_LOCKS`` (or the temporary folder's
    ``headloc-gpu-locks``), in a subfolder of the Slurm allocation when there is one."""
    base = Path(environ.get("HEADLOC_GPU_LOCKS") or Path(tempfile.gettempdir()) / "headloc-gpu-locks")
    slurm_job = environ.get("SLURM_JOB_ID")
    return base / f"slurm-job-{slurm_job}" if slurm_job else base


def claim_gpu(log: logging.Logger | None = None, *, spread: bool = False, environ=os.environ,
              wait: float = WAIT_SECONDS) -> GpuClaim | None:
    """Claim a free GPU for the rest of this process and make it the only one CUDA sees (see the
    module). Returns the claim, for information: it is held however the return value is used.

    Returns None, claiming nothing, on a machine without GPUs, with ``spread`` (a model placed by
    ``device_map``, which spreads over every GPU the job sees), or under Slurm unless it gave the
    job several GPUs. A second call in the same process returns the GPU it already holds. Waits,
    logging once, while every GPU is held by another process. Must run before CUDA is initialised.
    """
    log = log or logging.getLogger("headloc")
    shown = environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
    if spread:
        log.info("GPU: device_map spreads the model over every visible GPU (CUDA_VISIBLE_DEVICES=%s); "
                 "none claimed", shown)
        return None
    folder = lock_folder(environ)
    if folder in _HELD:  # this process holds one already: the same GPU again
        return _narrow(_HELD[folder][0], [_HELD[folder][0].gpu], environ, log)
    slurm_job = environ.get("SLURM_JOB_ID")
    gpus = visible_gpus(environ) if not slurm_job or "CUDA_VISIBLE_DEVICES" in environ else []
    if slurm_job and len(gpus) < 2:  # Slurm's own choice of GPU, or no GPU: never locked (module)
        log.info("GPU: Slurm job %s, CUDA_VISIBLE_DEVICES=%s as Slurm set it; none claimed", slurm_job, shown)
        return None
    if not gpus:
        return None
    return _narrow(_wait_for_gpu(gpus, folder, log, wait), gpus, environ, log)


def _narrow(claim: GpuClaim, gpus: list[str], environ, log: logging.Logger) -> GpuClaim:
    """Make ``claim``'s GPU the only one CUDA sees, and say so in the job's log."""
    environ["CUDA_VISIBLE_DEVICES"] = claim.gpu
    log.info("GPU: claimed %s of %s (pid %d, lock %s); CUDA_VISIBLE_DEVICES=%s",
             claim.gpu, ",".join(gpus), os.getpid(), claim.lock, claim.gpu)
    return claim


def _wait_for_gpu(gpus: list[str], folder: Path, log: logging.Logger, wait: float) -> GpuClaim:
    """The first of ``gpus`` whose lock in ``folder`` is free, waiting while all are held."""
    folder.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        for gpu in gpus:
            claim = _try_lock(gpu, folder / f"gpu-{gpu.replace('/', '_')}.lock")
            if claim:
                return claim
        if not waited:
            log.info("GPU: all of %s are held by other jobs; waiting for one to be free", ",".join(gpus))
            waited = True
        time.sleep(wait)


def _try_lock(gpu: str, lock: Path) -> GpuClaim | None:
    handle = open(lock, "a+")  # noqa: SIM115 - held open for the process's lifetime (_HELD)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")  # who holds it, for a person looking
    handle.flush()
    claim = GpuClaim(gpu, lock)
    _HELD[lock.parent] = (claim, handle)
    return claim
