"""One GPU per evaluating job on a machine of several GPUs, without a scheduler that assigns them.

Snakemake's ``--resources gpu=N`` caps how many evaluating jobs (rules with ``gpu=1``) run at once,
but it tells no job *which* GPU to use: each would load its model on ``cuda``, i.e. GPU 0. So an
evaluating job claims a GPU before it touches CUDA (:func:`claim_gpu`): it takes an exclusive lock
(``flock``) on the lock file of the first free GPU and narrows ``CUDA_VISIBLE_DEVICES`` to it, so
``cuda`` and ``cuda:0`` are that GPU for the rest of the job. The kernel releases the lock when the
process ends, however it ends (a killed job frees its GPU). Jobs of other workflows on the same
machine take the same locks, so they never share a GPU either.

Which GPUs: the ones ``CUDA_VISIBLE_DEVICES`` lists when it is set (so ``CUDA_VISIBLE_DEVICES=2,3
snakemake ... --resources gpu=2`` uses GPUs 2 and 3), else every GPU of the machine (one folder each
in /proc/driver/nvidia/gpus, else one line each of ``nvidia-smi -L``). Under Slurm (``SLURM_JOB_ID`` set) the scheduler has already chosen:
nothing is claimed and its ``CUDA_VISIBLE_DEVICES`` is respected.

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


@dataclass
class GpuClaim:
    """A GPU this process holds until it exits: ``gpu`` is its ``CUDA_VISIBLE_DEVICES`` entry."""

    gpu: str
    lock: Path
    handle: object  # the open lock file: closing it (or exiting) frees the GPU

    def release(self) -> None:
        self.handle.close()


def visible_gpus(environ=os.environ) -> list[str]:
    """The GPUs jobs may claim: ``CUDA_VISIBLE_DEVICES``'s entries, else the machine's GPUs."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip() and entry.strip() != "-1"]
    return [str(index) for index in range(machine_gpu_count())]


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
    return Path(environ.get("HEADLOC_GPU_LOCKS") or Path(tempfile.gettempdir()) / "headloc-gpu-locks")


def claim_gpu(log: logging.Logger | None = None, *, spread: bool = False, environ=os.environ,
              wait: float = WAIT_SECONDS) -> GpuClaim | None:
    """Claim a free GPU for this process and make it the only one CUDA sees (see the module).

    Returns None, claiming nothing, under Slurm, on a machine without GPUs, or with ``spread`` (a
    model placed by ``device_map``, which spreads over every GPU the job sees). Waits, logging once,
    while every GPU is held by another process. Must run before CUDA is initialised.
    """
    log = log or logging.getLogger("headloc")
    if spread:
        log.info("GPU: device_map spreads the model over every visible GPU (CUDA_VISIBLE_DEVICES=%s); "
                 "none claimed", environ.get("CUDA_VISIBLE_DEVICES", "(unset: all)"))
        return None
    if environ.get("SLURM_JOB_ID"):
        log.info("GPU: Slurm job %s, CUDA_VISIBLE_DEVICES=%s as Slurm set it", environ["SLURM_JOB_ID"],
                 environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
        return None
    gpus = visible_gpus(environ)
    if not gpus:
        return None
    folder = lock_folder(environ)
    folder.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        for gpu in gpus:
            claim = _try_lock(gpu, folder / f"gpu-{gpu.replace('/', '_')}.lock")
            if claim:
                environ["CUDA_VISIBLE_DEVICES"] = gpu
                log.info("GPU: claimed %s of %s (pid %d, lock %s); CUDA_VISIBLE_DEVICES=%s",
                         gpu, ",".join(gpus), os.getpid(), claim.lock, gpu)
                return claim
        if not waited:
            log.info("GPU: all of %s are held by other jobs; waiting for one to be free", ",".join(gpus))
            waited = True
        time.sleep(wait)


def _try_lock(gpu: str, lock: Path) -> GpuClaim | None:
    handle = open(lock, "a+")  # noqa: SIM115 - held open for the process's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")  # who holds it, for a person looking
    handle.flush()
    return GpuClaim(gpu, lock, handle)
