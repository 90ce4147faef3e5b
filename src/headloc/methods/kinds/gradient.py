"""Kind ``gradient``: one job differentiates the gold continuations' log-likelihood (attribution
patching, Causal Head Gating) instead of scoring masks.

Steps: :func:`gradient` (rule search_job, which loads the model and the gold continuations),
then the recovery (rule recover_heads), which reads the job's result. Its methods supply the
function the step calls (``algorithm``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from headloc.io import write_json
from headloc.methods.one_job import OneJob
from headloc.methods.registry import get
from headloc.methods.steps import RecoverParams, WithOptions


@dataclass(frozen=True)
class GradientParams(WithOptions):
    """Rule search_job, a gradient search: the method, its seed and its options."""

    method: str
    seed: int
    options: object = None

    @classmethod
    def of(cls, search) -> GradientParams:
        return cls(search.method.name, search.settings.seed, search.options)


class Gradient(OneJob):
    name = "gradient"
    algorithm = "fit(model, examples, options, seed, batch_size) -> result (headloc.engine.gradient_result.recovery_fields)"
    gold = True
    seeded = True
    steps = {"gradient": GradientParams, "recover": RecoverParams}
    unassessed = ("estimated", "a gradient estimates each head's effect; no head set was scored")

    def run(self, params: GradientParams, job) -> dict:
        model, examples = job.gradient
        return gradient(params, model, examples, job.batch_size, job.files.result(self.name), job.log)


def gradient(params: GradientParams, model, examples, batch_size: int, result_out, log) -> dict:
    """Rule search_job, a gradient search: run the gradient method on the gold continuations ``examples``
    (:class:`headloc.engine.supervision.Example`), ``batch_size`` rows per forward pass (memory only:
    the result does not depend on it); write its part of recovery.json (method, documents and
    :func:`headloc.engine.gradient_result.recovery_fields`) to ``result_out``."""
    from headloc.engine.gradient_result import recovery_fields

    started = time.perf_counter()
    result = get(params.method).algorithm(model, examples, params.options, params.seed, batch_size)
    ranked = recovery_fields(result)
    log.info("%s: %d fwd+bwd and %d forward passes in %.1f s, about %d masked evaluations; top heads %s",
             params.method, result.cost.fwd_bwd_passes, result.cost.forward_passes, time.perf_counter() - started,
             ranked["n_evals"], ", ".join(ranked["ranking"][:5]))
    found = {"method": params.method, "n_docs": len(examples), **ranked}
    write_json(result_out, found)
    return found
