"""The record of a search that runs in one job (the sequential and guided kinds): every head set
scored so far (as a mask) with its raw score and per-document scores, and every gradient taken (its
background as a mask, the estimate beside it and its cost in masked evaluations), in
``record.npz`` beside the job's result. The job writes it whole after each round or step, so that a
killed job's rerun resumes from it and scores or differentiates nothing twice; a record left by
another search or on other inputs (its ``identity`` differs) is not resumed.

It is no rule's output: Snakemake deletes a failed job's outputs, and the record must outlive them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from headloc.io import atomic_path, oriented
from headloc.search.evidence_record import extend_per_doc, of_record

GRADIENT_PARTS = ("backgrounds", "estimates", "costs")


def identity(params, key: str) -> str:
    """What a record belongs to: a step's parameters (a dataclass) and ``key`` (:func:`record_key`)."""
    return json.dumps({"params": asdict(params), "key": key}, sort_keys=True, default=str)


def record_key(*, task_digest: str, location: str, model: Mapping, task: Mapping, inputs) -> str:
    """What a one-job search's record depends on beyond its step's parameters: the task's digest,
    the model's location and settings, the task specs the job reads (``task``: by role, e.g.
    scoring and gold) and the modification time of each input file (model files, documents), so
    that a record left by a run on another model, other documents or another task is not resumed."""
    stamps = {str(path): os.stat(path).st_mtime_ns for path in inputs}
    return json.dumps({"task_digest": task_digest, "location": location, "model": model, "task": task,
                       "inputs": stamps}, sort_keys=True, default=str)


@dataclass
class Record:
    """What a one-job search has scored and differentiated so far (see the module docstring):
    ``masks`` with their raw ``scores`` and, where every row has them, ``per_doc`` scores;
    ``backgrounds`` with the ``estimates`` beside them and each gradient's cost (``costs``)."""

    identity: str
    masks: np.ndarray
    scores: np.ndarray
    backgrounds: np.ndarray
    estimates: np.ndarray
    costs: np.ndarray
    per_doc: np.ndarray | None = None

    @classmethod
    def empty(cls, identity: str, n_heads: int) -> Record:
        rows = np.zeros((0, n_heads), dtype=np.int8)
        return cls(identity, rows, np.zeros(0), rows.copy(), np.zeros((0, n_heads)), np.zeros(0))

    @classmethod
    def read(cls, path, identity: str, n_heads: int, log) -> Record:
        """The record at ``path``; empty when there is none or it is another search's."""
        found = cls.empty(identity, n_heads)
        if not Path(path).exists():
            return found
        with np.load(path) as kept:
            if str(kept["identity"]) != identity:
                log.info("%s was left by another search or inputs: starting afresh", path)
                return found
            found.masks, found.scores = kept["masks"], kept["scores"]
            found.per_doc = kept["per_doc"] if "per_doc" in kept.files else None
            if "backgrounds" in kept.files:
                found.backgrounds, found.estimates, found.costs = (kept[name] for name in GRADIENT_PARTS)
        log.info("resuming from %s: %d head sets scored, %d gradients taken", path, len(found.masks),
                 len(found.backgrounds))
        return found

    def write(self, path) -> None:
        """The whole record, atomically (:func:`headloc.io.atomic_path`): a kill at any instant leaves
        the previous record or this one, never half of one."""
        kept = {} if self.per_doc is None else {"per_doc": np.asarray(self.per_doc, dtype=float)}
        if len(self.backgrounds):
            kept.update(backgrounds=self.backgrounds, estimates=self.estimates, costs=self.costs)
        with atomic_path(path) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, identity=np.array(self.identity), masks=self.masks.astype(np.int8),
                     scores=self.scores.astype(float), **kept)

    @staticmethod
    def _find(rows: np.ndarray, row: np.ndarray):
        hits = np.flatnonzero((rows == row).all(axis=1)) if len(rows) else []
        return int(hits[0]) if len(hits) else None

    def score(self, mask: np.ndarray) -> float | None:
        """The raw score of ``mask`` if it was scored, else None."""
        at = self._find(self.masks, mask)
        return None if at is None else float(self.scores[at])

    def add_scores(self, masks: np.ndarray, raw, per_doc: np.ndarray | None = None) -> None:
        self.per_doc = extend_per_doc(self.per_doc, len(self.masks), per_doc)
        self.masks = np.vstack([self.masks, np.asarray(masks, dtype=np.int8)])
        self.scores = np.concatenate([self.scores, np.asarray(raw, dtype=float)])

    def estimate(self, background) -> np.ndarray | None:
        """The estimate taken beside ``background`` (flat head indices) if there is one, else None."""
        at = self._find(self.backgrounds, self.mask(background))
        return None if at is None else self.estimates[at].copy()

    def add_estimate(self, background, estimate: np.ndarray, cost: float) -> None:
        self.backgrounds = np.vstack([self.backgrounds, self.mask(background)[None]])
        self.estimates = np.vstack([self.estimates, np.asarray(estimate, dtype=float)[None]])
        self.costs = np.append(self.costs, cost)

    def evidence(self, coef, measured, *, top_k: int, seed: int, higher_is_better: bool):
        """Each head's evidence (:func:`headloc.search.evidence_record.of_record`) from every head set
        scored, its scores made higher-is-better; ``measured``: head -> (the heads ablated with it,
        without it) where its value ``coef`` is that difference."""
        per_doc = None if self.per_doc is None else oriented(self.per_doc, higher_is_better)
        return of_record(self.masks, oriented(self.scores, higher_is_better), per_doc, coef, measured, top_k=top_k,
                         seed=seed)

    def equivalent(self) -> float:
        """The gradients' cost, in masked evaluations."""
        return float(self.costs.sum())

    def mask(self, heads) -> np.ndarray:
        """``heads`` (flat indices) as a mask row."""
        mask = np.zeros(self.masks.shape[1], dtype=np.int8)
        mask[list(heads)] = 1
        return mask
