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
from collections.abc import Sequence
from dataclasses import dataclass
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
    """The chunk score tables of one design, joined and in mask order, with ``score`` higher-is-better.

    This is the searches' one sign convention: a table says whether its metric is higher-is-better
    (column ``higher_is_better``, written by the scoring job from the task's declaration), and a
    lower-is-better metric's scores (a perplexity) are negated here, so that every ranking, greedy
    choice and stability estimate downstream takes "lower score" to mean "the task got worse".
    The raw scores stay in the files (and in ``raw``)."""
    import pandas as pd

    frame = pd.concat(pd.read_csv(path, sep="\t") for path in paths).sort_values("mask")
    if "higher_is_better" not in frame or frame["higher_is_better"].isna().any():
        raise ValueError(f"the score tables {', '.join(map(str, paths))} do not say whether their metric is "
                         "higher-is-better (column higher_is_better): written by an older headloc? "
                         "delete them to score again")
    if frame["higher_is_better"].nunique() > 1:
        raise ValueError(f"the score tables {', '.join(map(str, paths))} mix metrics of both directions")
    frame["raw"] = frame["score"]
    if len(frame):  # no rows (cs_adaptive's stage 2 after a settled stage 1): nothing to orient
        frame["score"] = oriented(frame["raw"], bool(frame["higher_is_better"].iloc[0]))
    return frame


def oriented(scores, higher_is_better: bool):
    """``scores`` as higher-is-better: negated for a lower-is-better metric (see :func:`read_scores`)."""
    return scores if higher_is_better else -scores


def write_scores(table, samples, rows, found, higher_is_better: bool, records=None) -> None:
    """A scoring job's two files: the score table (``table``: mask, raw score, the metric's
    direction) and one JSON line per mask (``samples``: its score, its per-document scores where
    ``found``, a :class:`headloc.io.Scored`, has them, and lm-eval's per-document
    ``records`` where given), from which a search's evidence is drawn (:func:`read_per_doc`)."""
    import pandas as pd

    per_doc = found.per_doc
    lines = []
    for i, (row, score) in enumerate(zip(rows, found.scores)):
        line = {"mask": int(row), "score": float(score), "per_doc": None if per_doc is None else per_doc[i].tolist()}
        if records is not None:
            line["samples"] = records[i]
        lines.append(json.dumps(line) + "\n")
    write_text(samples, "".join(lines))
    write_table(table, pd.DataFrame({"mask": np.asarray(rows, dtype=int), "score": np.asarray(found.scores, dtype=float),
                                     "higher_is_better": higher_is_better}))


def read_per_doc(paths, n_masks: int, higher_is_better: bool) -> np.ndarray | None:
    """The per-document scores of a design's ``n_masks`` masks (masks x documents, in mask order,
    oriented as :func:`read_scores` orients the scores) from its scoring jobs' samples files; None
    where a mask has none (a callable task, an aggregate metric, or files written before they were
    kept)."""
    rows = {}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            rows[int(record["mask"])] = record.get("per_doc")

    found = per_doc_matrix([rows.get(i) for i in range(n_masks)])
    return None if found is None else oriented(found, higher_is_better)


@dataclass(frozen=True)
class Scored:
    """What scoring a batch of head sets gives: each set's score and, where the score is a mean over
    documents, each set's per-document scores (sets x documents); None where it is not (a callable
    task's one number, an aggregate such as a perplexity)."""

    scores: np.ndarray
    per_doc: np.ndarray | None = None

    @classmethod
    def of(cls, value) -> Scored:
        """``value`` as scored: a :class:`Scored`, or bare scores (no per-document scores)."""
        if isinstance(value, Scored):
            return value
        return cls(np.asarray(value, dtype=float).reshape(-1))


def per_doc_matrix(rows: Sequence) -> np.ndarray | None:
    """Stack per-document score vectors (None where a set has none) into sets x documents, or None
    when there are none, any set lacks them or their numbers of documents differ."""
    if len(rows) == 0 or any(row is None for row in rows):
        return None
    if len({len(row) for row in rows}) != 1:
        return None
    return np.asarray(np.vstack(rows), dtype=float)
