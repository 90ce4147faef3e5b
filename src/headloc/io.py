"""File I/O shared by the workflow's scripts: every target is written atomically.

A target is written to a temporary file in its own directory and renamed into place once
complete, so an interrupted job leaves the previous state (usually: no file), never half a file.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

import numpy as np


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp files are private; targets are not
        _fsync(tmp)  # the bytes reach the disk before the name does (node crash, not only kill)
        os.replace(tmp, path)
        _fsync(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def remove_stale_temporaries(path) -> list[Path]:
    """Delete temporary files a killed writer of ``path`` left behind (``.{name}.*.tmp``).

    Only the job that produces a target writes it (Snakemake locks the outputs), so any such
    file is debris of an earlier, interrupted attempt.
    """
    path = Path(path)
    stale = [p for p in path.parent.glob(f".{glob.escape(path.name)}.*.tmp") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def _fsync(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def read_json(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def save_npy(path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, array)


def write_table(path, frame) -> None:
    """A pandas DataFrame as TSV (``.tsv``) or CSV (anything else)."""
    sep = "\t" if str(path).endswith(".tsv") else ","
    write_text(path, frame.to_csv(sep=sep, index=False))


def log_to_file(path) -> logging.Logger:
    """Send this process's logging, warnings and stderr (progress bars included) to ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stream = open(path, "a", buffering=1, encoding="utf-8")
    sys.stderr = stream
    logging.basicConfig(stream=stream, level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    return logging.getLogger("headloc")


def read_scores(paths):
    """The chunk score tables of one design (``mask``, ``score``), joined and in mask order."""
    import pandas as pd

    return pd.concat(pd.read_csv(path, sep="\t") for path in paths).sort_values("mask")
