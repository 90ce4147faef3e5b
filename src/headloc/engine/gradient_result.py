"""What a gradient method (``attribution``, ``chg``) spent and found, in ``recovery.json``'s terms:
:class:`Cost` counts its passes and their equivalent in masked evaluations, :class:`MethodResult`
holds its answer, :func:`recovery_fields` writes it out.

Apart from building and scoring the gold continuations (:mod:`headloc.engine.supervision`,
:mod:`headloc.engine.gold_scoring`): this is the bookkeeping around them, the same for every
gradient method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from headloc.engine.gold_scoring import Batch
from headloc.engine.supervision import Example
from headloc.heads import HeadGeometry, head_name

# A fwd+bwd pass costs about three forward passes (the backward pass computes two matrix products
# per forward one; with frozen weights it skips the weight gradients, so this overcounts a little).
FWD_BWD_IN_FORWARDS = 3.0


@dataclass
class Cost:
    """What a gradient method spent, and its equivalent in masked evaluations.

    ``fwd_bwd_*`` count passes with a backward pass, ``forward_*`` forward-only passes (CHG's
    held-out checks); rows are (document, gate) pairs, tokens the real tokens those rows read.
    ``eval_tokens`` is what one masked evaluation reads: one forward pass over the identification
    subset, every document once (for a generation task a masked evaluation also decodes, so the
    equivalent flatters masked evaluation a little). ``n_evals`` =
    ``(3 * fwd_bwd_tokens + forward_tokens) / eval_tokens``, rounded up.
    """

    eval_tokens: int
    fwd_bwd_passes: int = 0
    fwd_bwd_rows: int = 0
    fwd_bwd_tokens: int = 0
    forward_passes: int = 0
    forward_rows: int = 0
    forward_tokens: int = 0
    seconds: float = 0.0

    def add(self, batch: Batch, n_gates: int, backward: bool) -> None:
        rows, tokens = batch.input_ids.shape[0] * n_gates, batch.n_tokens * n_gates
        if backward:
            self.fwd_bwd_passes += 1
            self.fwd_bwd_rows += rows
            self.fwd_bwd_tokens += tokens
        else:
            self.forward_passes += 1
            self.forward_rows += rows
            self.forward_tokens += tokens

    @property
    def eval_equivalent(self) -> float:
        return (FWD_BWD_IN_FORWARDS * self.fwd_bwd_tokens + self.forward_tokens) / self.eval_tokens

    @property
    def n_evals(self) -> int:
        return int(math.ceil(self.eval_equivalent - 1e-9))

    def as_dict(self) -> dict:
        return {**asdict(self), "eval_equivalent": self.eval_equivalent, "n_evals": self.n_evals}


@dataclass
class MethodResult:
    """A gradient method's answer, in the terms of ``recovery.json``.

    ``effects`` holds one number per head (flat index), more negative = more important, the sign
    of the Lasso's coefficients; ``ranking`` the flat head indices, most important first;
    ``baseline`` the unablated score the effects are relative to (None where there is none);
    ``extra`` the method's own fields (JSON-ready).
    """

    method: str
    geometry: HeadGeometry
    ranking: list[int]
    effects: np.ndarray
    cost: Cost
    baseline: float | None = None
    extra: dict = field(default_factory=dict)

    def names(self) -> list[str]:
        return [head_name(i, self.geometry.n_heads) for i in range(self.geometry.total)]


def recovery_fields(result: MethodResult) -> dict:
    """The method-dependent part of ``recovery.json``, as ``scripts/recover_heads.py`` writes it.

    Keys: ``n_evals`` (masked-evaluation equivalent), ``alpha`` and ``r2`` (None: no Lasso),
    ``intercept`` (the unablated score), ``ranking`` (head names, most important first), ``coef``
    (head name -> effect), ``cost`` (:class:`Cost` in full) and the method's own fields.
    """
    names = result.names()
    return {
        "n_evals": result.cost.n_evals,
        "alpha": None,
        "r2": None,
        "intercept": result.baseline,
        "ranking": [names[i] for i in result.ranking],
        "coef": {name: float(value) for name, value in zip(names, result.effects)},
        "cost": result.cost.as_dict(),
        **result.extra,
    }


def head_map(values, geometry: HeadGeometry) -> dict[str, float]:
    """A flat per-head array as {head name: value}."""
    values = np.asarray(values, dtype=float).reshape(-1)
    return {head_name(i, geometry.n_heads): float(v) for i, v in enumerate(values)}


def total_tokens(examples: Sequence[Example]) -> int:
    """Tokens one forward pass over ``examples`` reads (a masked evaluation's size)."""
    return int(sum(example.n_tokens for example in examples))


__all__ = ["Cost", "MethodResult", "head_map", "recovery_fields", "total_tokens"]
