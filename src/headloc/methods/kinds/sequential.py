"""Kind ``sequential``: one job scores round after round, each round's masks chosen from the
scores so far (group testing, Thompson sampling), keeping a record to resume from.

Steps: :func:`sequential` (rule search_job, which loads the model and hands the step its
``score(masks)``), then the recovery (rule recover_heads), which reads the job's result. Its
methods supply the builder of their :class:`~headloc.search.sequential.SequentialSearch`
(``algorithm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from headloc.heads import HeadGeometry
from headloc.io import Scored, oriented, write_json
from headloc.methods.one_job import OneJob
from headloc.methods.record import Record, identity
from headloc.methods.registry import get
from headloc.methods.steps import RecoverParams, WithOptions
from headloc.search.evidence import log_evidence


@dataclass(frozen=True)
class SequentialParams(WithOptions):
    """Rule search_job, a sequential search: the method, its n_masks (masks scored at most, the unablated row
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


class Sequential(OneJob):
    name = "sequential"
    algorithm = "build(n_heads, params: SequentialParams) -> headloc.search.sequential.SequentialSearch"
    scored = True
    steps = {"sequential": SequentialParams, "recover": RecoverParams}

    def least_masks(self, method) -> tuple[int, str]:
        return 2, "the unablated model's score, then at least one mask"

    def run(self, params: SequentialParams, job) -> dict:
        return sequential(params, job.geometry, job.score, job.files.record(), job.files.result(self.name), job.log,
                          key=job.key)


def sequential(params: SequentialParams, geometry: HeadGeometry, score, record_path, result_out, log, *,
               key: str = "") -> dict:
    """Rule search_job, a sequential search: the method's search, round by round, each round's masks
    scored in one call of ``score(masks) -> scores`` (raw, in the metric's direction, so that the
    round shares forward passes), every round appended to the record at ``record_path`` before the
    next is proposed. A record left by a killed run of the same search (same parameters and
    ``key``: what the scores depend on beyond them, e.g. the model's and documents' files) is
    resumed: no mask it holds is scored again. Writes the method's part of recovery.json to
    ``result_out``."""
    search = get(params.method).algorithm(geometry.total, params)
    record = Record.read(record_path, identity(params, key), geometry.total, log)
    live = search.resume(record.masks, oriented(record.scores, params.higher_is_better))  # one replay, then rounds
    scored = 0
    while live.pending is not None:
        pending = live.pending
        found = Scored.of(score(pending))
        if len(found.scores) != len(pending):
            raise ValueError(f"score returned {len(found.scores)} scores for {len(pending)} masks")
        record.add_scores(pending, found.scores, found.per_doc)
        record.write(record_path)
        scored += len(pending)
        log.info("%s: scored %d masks this round, %d in the record (n_masks %d)", params.method, len(pending),
                 len(record.masks), params.n_masks)
        live.advance(oriented(found.scores, params.higher_is_better))
    found = live.found
    log.info("%s: done after %d masks (%d scored in this run); top heads %s", params.method, found.n_evals, scored,
             ", ".join(geometry.names[i] for i in found.ranking[: params.top_k]))
    warnings = found.warnings(geometry.names, params.top_k, params.method)
    for warning in warnings:
        log.warning(warning)
    # a head confirmed alone is measured: its value is its set's score less the unablated one
    alone = {int(h): ((int(h),), ()) for h in (found.confirmed or ())}
    evidence = record.evidence(found.coef, alone, top_k=params.top_k, seed=params.seed,
                               higher_is_better=params.higher_is_better)
    log_evidence(evidence, geometry.names, found.coef, log)
    result = {"method": params.method, **sequential_fields(found, geometry.names), "warnings": warnings,
              **evidence.fields(geometry.names, found.coef)}
    write_json(result_out, result)
    return result


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
