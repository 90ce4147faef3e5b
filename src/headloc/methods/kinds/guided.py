"""Kind ``guided``: one job that both scores masks and takes gradients between its steps: each step
a gradient beside the heads chosen so far (attribution with their gates at 0) draws up a short
list, and the job scores each listed head ablated beside them (gradient-guided greedy,
:mod:`headloc.search.guided`), keeping a record to resume from.

Steps: :func:`guided` (rule search_job, which loads the model once and hands the step both the
scoring task's ``score(masks)`` and the gold continuations of the same documents), then the
recovery (rule recover_heads), which reads the job's result. Its methods supply the search
(``algorithm``), which chooses heads from the estimates and scores the step gives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import Scored, oriented, write_json
from headloc.methods.one_job import OneJob
from headloc.methods.record import Record, identity
from headloc.methods.registry import get
from headloc.methods.steps import RecoverParams, WithOptions
from headloc.search.evidence import log_evidence


@dataclass(frozen=True)
class GuidedParams(WithOptions):
    """Rule search_job, a guided search: the method, the top k it chooses, its options, the scored metric's
    direction and the search's seed (a search that draws at random: screened greedy's partition)."""

    method: str
    top_k: int
    options: object = None
    higher_is_better: bool = True
    seed: int = 0

    @classmethod
    def of(cls, search) -> GuidedParams:
        return cls(search.method.name, search.settings.top_k, search.options, search.higher_is_better,
                   search.settings.seed)


class Guided(OneJob):
    name = "guided"
    algorithm = ("choose_heads(estimate, score_sets, n_heads, params: GuidedParams) -> "
                 "headloc.search.guided.GuidedSteps (estimate(background): every head's estimated drop beside "
                 "it; score_sets(head sets): higher-is-better scores)")
    scored = True
    gold = True
    steps = {"guided": GuidedParams, "recover": RecoverParams}

    def run(self, params: GuidedParams, job) -> dict:
        model, examples = job.gradient
        return guided(params, job.geometry, job.score, model, examples, job.batch_size, job.files.record(),
                      job.files.result(self.name), job.log, key=job.key)


def guided(params: GuidedParams, geometry: HeadGeometry, score, model, examples, batch_size: int, record_path,
           result_out, log, *, key: str = "") -> dict:
    """Rule search_job, a guided search: the method's search, ``score(masks) -> raw scores`` (in the metric's
    direction; one call per step, so that a step's masks share forward passes) scoring its head
    sets, attribution on ``examples`` (the same documents' gold continuations, ``batch_size`` per
    pass: memory only) estimating each head's drop beside a background. Every score and estimate
    goes into the record at ``record_path`` as soon as it is known; a record left by a killed run
    of the same search (same parameters and ``key``, as the sequential kind's) is resumed: nothing
    it holds is scored or differentiated again. Writes the method's part of recovery.json to
    ``result_out``."""
    record = Record.read(record_path, identity(params, key), geometry.total, log)

    def score_sets(head_sets: list) -> list[float]:
        masks = np.array([record.mask(heads) for heads in head_sets])
        new = [row for row in masks if record.score(row) is None]
        if new:
            found = Scored.of(score(np.array(new)))
            if len(found.scores) != len(new):
                raise ValueError(f"score returned {len(found.scores)} scores for {len(new)} masks")
            record.add_scores(np.array(new), found.scores, found.per_doc)
            record.write(record_path)
            log.info("%s: scored %d head sets, %d in the record", params.method, len(new), len(record.masks))
        return list(oriented(np.array([record.score(row) for row in masks]), params.higher_is_better))

    def estimate(background: list[int]) -> np.ndarray:
        found = record.estimate(background)
        if found is None:
            from headloc.search.attribution import attribution

            result = attribution(model, examples, batch_size=batch_size, background=background)
            found = -result.effects
            record.add_estimate(background, found, result.cost.eval_equivalent)
            record.write(record_path)
            log.info("%s: gradient beside %d heads (%.1f masked evaluations' worth)", params.method,
                     len(background), result.cost.eval_equivalent)
        return found

    chosen = get(params.method).algorithm(estimate, score_sets, geometry.total, params)
    fields = guided_fields(chosen, record.equivalent(), geometry.names)
    coef = np.array([fields["coef"][name] for name in geometry.names])
    evidence = record.evidence(coef, measured_sets(chosen), top_k=params.top_k, higher_is_better=params.higher_is_better,
                               seed=0)  # the resamples' seed: a guided search draws nothing else at random
    log_evidence(evidence, geometry.names, coef, log)
    result = {"method": params.method, "n_docs": len(examples), **fields, **evidence.fields(geometry.names, coef)}
    log.info("%s: %d masked evaluations and %d gradient passes (%d evaluations in all); heads %s", params.method,
             chosen.evaluations, chosen.gradient_passes, result["n_evals"], ", ".join(result["ranking"][:params.top_k]))
    write_json(result_out, result)
    return result


def guided_fields(chosen, gradient_equivalent: float, names) -> dict:
    """recovery.json's ranking fields of a :class:`headloc.search.guided.GuidedSteps`: the chosen heads
    in their order, each one's value the score change measured when it joined (beside its
    background); every other head's value the change measured for it at the last step that listed
    it, or 0 where it was never listed. Heads after the chosen ones: those a search that stopped short
    took below the noise (``details["below_noise"]``, in their order), the measured ones by their
    change (where the last step chose nothing, the heads it measured first), then the rest in the
    last gradient's order. ``n_evals``: the masked evaluations (the
    unablated one included) and the gradient passes' worth in masked evaluations, rounded up."""
    coef, labels = np.zeros(len(names)), ["not measured"] * len(names)
    for listed, measured, background in zip(chosen.lists, chosen.measured, chosen.backgrounds):
        for head in listed:
            coef[head] = -measured[head]
            labels[head] = f"measured beside {len(background)} heads"
    for head, drop, label in zip(chosen.heads, chosen.drops, chosen.labels):
        coef[head], labels[head] = -drop, label
    below = list(chosen.details.get("below_noise", ()))  # screened greedy's steps after it stopped
    for head in below:
        labels[head] = f"below the noise (not found), {labels[head]}"
    first = list(chosen.heads) + below
    # where the last step chose nothing, the heads it measured beside every chosen head come first
    # among the rest: a head that hurt beside fewer may restore the score beside them all
    # (antonyms, seed 1: L2H1 lowers it 1.4 nats beside L0H4, raises it 1.2 beside L0H4 and L0H7)
    last = set(chosen.lists[-1]) if chosen.picked and chosen.picked[-1] is None else set()
    measured = sorted({h for listed in chosen.lists for h in listed} - set(first),
                      key=lambda h: (h not in last, coef[h], h))
    rest = [h for h in chosen.last_order if h not in set(first) | set(measured)]
    ranking = first + measured + rest
    steps = [{"chosen": None if head is None else names[head],
              "drop": float(max(found.values()) if head is None else found[head]), "list": [names[h] for h in listed]}
             for head, found, listed in zip(chosen.picked, chosen.measured, chosen.lists)]
    found = {key: [names[h] for h in heads] for key, heads in chosen.details.items()}
    if chosen.probes:
        found["probes"] = [{**probe, **{key: [names[h] for h in probe[key]] for key in ("beside", "pair", "leads")}}
                           for probe in chosen.probes]
    return {
        "n_evals": int(chosen.evaluations + math.ceil(gradient_equivalent - 1e-9)), "alpha": None, "r2": None,
        "intercept": float(chosen.baseline), "ranking": [names[h] for h in ranking],
        "coef": {name: float(value) for name, value in zip(names, coef)},
        "labels": dict(zip(names, labels)),
        "details": {"steps": steps, **found, "masked_evaluations": chosen.evaluations,
                    "gradient_passes": chosen.gradient_passes, "gradient_equivalent": float(gradient_equivalent)},
        "confirmed": [names[h] for h in chosen.heads],
        "warnings": [],
    }


def measured_sets(chosen) -> dict[int, tuple[list[int], list[int]]]:
    """Each listed head's measurement, as :func:`guided_fields` values it: its step's background with
    it, and without it (the last step that listed it); a chosen head's, beside its own background
    (with a pair's partner)."""
    sets = {}
    for listed, background in zip(chosen.lists, chosen.backgrounds):
        sets.update({int(head): (list(background) + [int(head)], list(background)) for head in listed})
    for head, background, together in zip(chosen.heads, chosen.beside, chosen.together):
        sets[int(head)] = (list(background) + [int(head)] + list(together), list(background))
    return sets
