"""The step every search ends with, :func:`recover` (checkpoint recover_heads): its parameters
(:class:`RecoverParams`) and the files it reads (:class:`RecoverInputs`), whatever the method's
kind. The steps before it are each kind's own (:mod:`headloc.methods.kinds`, one module per kind,
one function per rule); a rule's script reads Snakemake's params into its step's dataclass and makes
one call, and :func:`headloc.methods.driver.drive` makes the same calls in one process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from headloc.heads import HeadGeometry
from headloc.methods.registry import get


class WithOptions:
    """Step parameters with a method's options: a mapping given (a rule's params, which Snakemake
    passes as plain values) is read into the method's :class:`~headloc.methods.settings.MethodOptions`."""

    def __post_init__(self):
        object.__setattr__(self, "options", get(self.method).options_of(self.options))


@dataclass(frozen=True)
class RecoverParams:
    """Checkpoint recover_heads: the method, the Lasso penalty, the seed, the top k, the scored
    metric's direction (recorded) and, for a nested budget, how many rows of the full design it fits
    (``nested_rows``; None: every row)."""

    method: str
    alpha: float | str
    seed: int
    top_k: int
    higher_is_better: bool = True
    nested_rows: int | None = None

    @classmethod
    def of(cls, search) -> RecoverParams:
        s = search.settings
        return cls(search.method.name, s.alpha, s.seed, s.top_k, search.higher_is_better, search.nested_rows)


@dataclass(frozen=True)
class RecoverInputs:
    """The files the earlier steps of a search left for :func:`recover`, by kind
    (:meth:`headloc.methods.kinds.Kind.recovery_inputs` names them): a design's masks, scores and
    per-document samples (and stage 2's), greedy's rounds (``chosen.json`` each), a one-job search's ``result``
    (``gradient.json``, ``sequential.json``); for a draw only the model's files, which it waits for."""

    masks: str | None = None
    scores: Sequence[str] = ()
    samples: Sequence[str] = ()
    stage2_masks: str | None = None
    stage2_scores: Sequence[str] = ()
    stage2_samples: Sequence[str] = ()
    rounds: Sequence[str] = ()
    result: str | None = None
    model: Sequence[str] = ()

    @classmethod
    def of(cls, inputs) -> RecoverInputs:
        """From a rule's named inputs (a mapping, or Snakemake's ``input``)."""
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in inputs.items() if name in known})

    def named(self) -> dict:
        """The files as a rule's named inputs: every one given."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, (), [])}


def recover(params: RecoverParams, inputs: RecoverInputs, geometry: HeadGeometry, log) -> dict:
    """Checkpoint recover_heads: the method's ``recover`` ranks the heads from ``inputs``; returned
    with the method, the model's geometry and the top k: recovery.json less the search's identity
    (model, task, search), which the caller adds. Every record has ``confirmed`` (the heads its
    search ablated alone and accepted; None for a search that confirms none) and ``warnings`` (what
    a reader of its top heads must know, in words; a sequential search's, else none)."""
    method = get(params.method)
    found = method.recover(inputs, geometry.names, params, log)
    if "status" not in found:  # a search that assesses no head (headloc.search.evidence)
        from headloc.search.evidence import not_assessed

        found.update(not_assessed(geometry.names, *method.kind.unassessed))
    top = found["ranking"][: params.top_k]
    log.info("%s: top heads %s after %d evaluations", params.method, ", ".join(top), found["n_evals"])
    for warning in found.get("warnings", []):
        log.warning(warning)
    return {
        "method": params.method,
        "n_layers": geometry.n_layers,
        "n_heads": geometry.n_heads,
        "confirmed": None,
        "warnings": [],
        **found,
        "top_heads": top,
        # a scored method's coef and intercept are changes of the score made higher-is-better
        # (negated for a lower-is-better metric: headloc.io.read_scores); a gradient method's are
        # changes of the gold continuations' log-likelihood, higher-is-better by construction
        "higher_is_better": params.higher_is_better if method.kind.scored else True,
    }
