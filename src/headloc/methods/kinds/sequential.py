"""Kind ``sequential``: one job scores round after round, each round's masks chosen from the
scores so far (group testing, Thompson sampling), keeping a record to resume from.

Steps: :func:`sequential` (rule sequential_search, which loads the model and hands the step its
``score(masks)``), then the recovery (rule recover_heads), which reads the job's result. Its
methods supply the builder of their :class:`~headloc.search.sequential.SequentialSearch`
(``algorithm``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import Scored, atomic_path, oriented, write_json
from headloc.methods.kinds import Kind, SearchFiles, read_result
from headloc.methods.registry import get
from headloc.methods.steps import RecoverInputs, RecoverParams, WithOptions
from headloc.search.evidence import extend_per_doc, log_evidence, of_record


@dataclass(frozen=True)
class SequentialParams(WithOptions):
    """Rule sequential_search: the method, its n_masks (masks scored at most, the unablated row
    included), seed, the top k it looks for, the share of heads a mask ablates (Thompson sampling),
    its options and the scored metric's direction."""

    method: str
    n_masks: int
    seed: int
    top_k: int
    sparsity: float
    options: object = None
    higher_is_better: bool = True

    @classmethod
    def of(cls, search) -> SequentialParams:
        s = search.settings
        return cls(search.method.name, s.n_masks, s.seed, s.top_k, s.sparsity, search.options, search.higher_is_better)


class Sequential(Kind):
    name = "sequential"
    algorithm = "build(n_heads, params: SequentialParams) -> headloc.search.sequential.SequentialSearch"
    scored = True
    rule = "sequential_search"
    recover = staticmethod(read_result)
    steps = {"sequential": SequentialParams, "recover": RecoverParams}

    def least_masks(self, method) -> tuple[int, str]:
        return 2, "the unablated model's score, then at least one mask"

    def recovery_inputs(self, files: SearchFiles, search, model=()) -> RecoverInputs:
        return RecoverInputs(result=files.result(self.name))

    def drive(self, search, job) -> RecoverInputs:
        sequential(self.params("sequential", search), job.geometry, job.score, job.files.record(),
                   job.files.result(self.name), job.log)
        return self.recovery_inputs(job.files, search)


def sequential(params: SequentialParams, geometry: HeadGeometry, score, record_path, result_out, log, *,
               key: str = "") -> dict:
    """Rule sequential_search: the method's sequential search, round by round, each round's masks
    scored in one call of ``score(masks) -> scores`` (raw, in the metric's direction, so that the
    round shares forward passes), every round appended to the record at ``record_path`` before the
    next is proposed. A record left by a killed run of the same search (same parameters and
    ``key``: what the scores depend on beyond them, e.g. the model's and documents' files) is
    resumed: no mask it holds is scored again. Writes the method's part of recovery.json to
    ``result_out``."""
    search = get(params.method).algorithm(geometry.total, params)
    identity = json.dumps({"params": asdict(params), "key": key}, sort_keys=True, default=str)
    masks, raw, per_doc = read_record(record_path, identity, geometry.total, log)
    live = search.resume(masks, oriented(raw, params.higher_is_better))  # one replay, then round by round
    scored = 0
    while live.pending is not None:
        pending = live.pending
        found = Scored.of(score(pending))
        new = found.scores
        if len(new) != len(pending):
            raise ValueError(f"score returned {len(new)} scores for {len(pending)} masks")
        per_doc = extend_per_doc(per_doc, len(masks), found.per_doc)
        masks, raw = np.vstack([masks, pending]), np.concatenate([raw, new])
        write_record(record_path, masks, raw, identity, per_doc)
        scored += len(pending)
        log.info("%s: scored %d masks this round, %d in the record (n_masks %d)", params.method, len(pending),
                 len(masks), params.n_masks)
        live.advance(oriented(new, params.higher_is_better))
    found = live.found
    log.info("%s: done after %d masks (%d scored in this run); top heads %s", params.method, found.n_evals, scored,
             ", ".join(geometry.names[i] for i in found.ranking[: params.top_k]))
    warnings = found.warnings(geometry.names, params.top_k, params.method)
    for warning in warnings:
        log.warning(warning)
    # a head confirmed alone is measured: its value is its set's score less the unablated one
    alone = {int(h): ((int(h),), ()) for h in (found.confirmed or ())}
    y = oriented(raw, params.higher_is_better)
    evidence = of_record(masks, y, None if per_doc is None else oriented(per_doc, params.higher_is_better),
                         found.coef, alone, top_k=params.top_k, seed=params.seed)
    log_evidence(evidence, geometry.names, found.coef, log)
    result = {"method": params.method, **sequential_fields(found, geometry.names), "warnings": warnings,
              **evidence.fields(geometry.names, found.coef)}
    write_json(result_out, result)
    return result


def record_key(*, task_digest: str, location: str, model: Mapping, task: Mapping, inputs) -> str:
    """What a sequential search's record depends on beyond the step's parameters (``key`` of
    :func:`sequential`): the task's digest, the model's location and settings, the task's spec and
    the modification time of each input file (model files, documents), so that a record left by
    a run on another model, other documents or another task is not resumed."""
    stamps = {str(path): os.stat(path).st_mtime_ns for path in inputs}
    return json.dumps({"task_digest": task_digest, "location": location, "model": model, "task": task,
                       "inputs": stamps}, sort_keys=True, default=str)


def sequential_fields(found, names: Sequence[str]) -> dict:
    """recovery.json's ranking fields of a sequential search's
    :class:`~headloc.search.sequential.Recovery`: ranked head names, each head's value and what it
    is (``labels``), the evaluations (the unablated row included) and the unablated score
    (``intercept``); ``details`` are the search's own, heads named as everywhere else; ``confirmed``
    the heads it ablated alone and accepted (None: it confirms none)."""
    confirmed = None if found.confirmed is None else [names[i] for i in found.confirmed]
    return {
        "n_evals": int(found.n_evals), "alpha": None, "r2": None, "intercept": float(found.baseline),
        "ranking": [names[i] for i in found.ranking],
        "coef": {name: float(value) for name, value in zip(names, found.coef)},
        "labels": dict(zip(names, found.labels)),
        "details": found.named_details(names),
        "confirmed": confirmed,
    }


def read_record(path, identity: str, n_heads: int, log) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A sequential search's record (masks, raw scores, raw per-document scores or None) at
    ``path``; empty when there is none, or when it is another search's (its ``identity`` differs:
    the search is started afresh)."""
    empty = np.zeros((0, n_heads), dtype=np.int8), np.zeros(0), None
    if not Path(path).exists():
        return empty
    with np.load(path) as record:
        if str(record["identity"]) != identity:
            log.info("%s was left by another search or inputs: starting afresh", path)
            return empty
        masks, raw = record["masks"], record["scores"]
        per_doc = record["per_doc"] if "per_doc" in record.files else None
    log.info("resuming from %s: %d masks already scored", path, len(masks))
    return masks, raw, per_doc


def write_record(path, masks: np.ndarray, raw: np.ndarray, identity: str, per_doc: np.ndarray | None = None) -> None:
    """The whole record, atomically (:func:`headloc.io.atomic_path`): a kill at any instant leaves
    the previous record or this one, never half of one. ``per_doc``: each mask's per-document raw
    scores, where every mask has them."""
    kept = {} if per_doc is None else {"per_doc": np.asarray(per_doc, dtype=float)}
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, masks=masks.astype(np.int8), scores=raw.astype(float), identity=np.array(identity), **kept)
