"""Search methods: one module each, and the registry that every consumer reads.

Each module of this package (but :mod:`~headloc.methods.contract`, which defines the contract,
:mod:`~headloc.methods.registry`, which finds the methods, and :mod:`~headloc.methods.driver`, which
runs any method in one process) declares its methods in a ``METHODS`` tuple of
:class:`~headloc.methods.contract.Method`; adding a method is adding a module (docs/methods.md, "Adding a method"). The plan, the rules and scripts, the
config schema's enums, the report and the benchmarks ask the registry, never a method's name.

>>> get("cs_stratified").kind, get("cs_stratified").nested
('masks', True)
>>> "greedy" in names() and REFERENCE in names()
True
>>> get("lasso")
Traceback (most recent call last):
...
ValueError: unknown search method 'lasso'; known: attribution, chg, cs_stratified, cs_bernoulli, cs_adaptive, greedy, greedy1s...
"""

from __future__ import annotations

import numpy as np

from headloc.methods.contract import KINDS, Method, SearchParts
from headloc.methods.registry import get, names, registry

__all__ = ["KINDS", "REFERENCE", "Method", "SearchParts", "get", "make_masks", "names", "registry"]

REFERENCE = "greedy"  # the method the efficiency benchmarks and Table 4's recall measure the others against


def make_masks(n_heads: int, n_masks: int | None = None, *, method: str = "cs_stratified",
               sparsity: float | None = None, random_state: int | None = 0) -> np.ndarray:
    """The measurement matrix of a search: ``(M, N)`` int8, 1 = ablated, a pure function of its
    arguments (the same ``random_state``, the same matrix).

    ``n_masks`` and ``sparsity`` are checked for a method that spends a budget
    (``cs_adaptive``'s matrix is its stage 1: the screen's share of the budget); one-shot greedy's
    is the zero row and the identity whatever they are.

    >>> phi = make_masks(20, 8, method="cs_stratified", sparsity=0.1, random_state=0)
    >>> phi.shape, phi.sum(axis=1).tolist()
    ((8, 20), [2, 2, 2, 2, 2, 2, 2, 2])
    >>> int(phi.sum(axis=0).max() - phi.sum(axis=0).min())
    1
    """
    spec = get(method)
    if spec.design is None:
        raise ValueError(f"search method {method!r} ({spec.kind}) has no mask design; "
                         f"expected one of {', '.join(names(kind='masks'))}")
    if spec.budgeted:
        if n_masks is None or n_masks < 1:
            raise ValueError(f"n_masks must be a positive integer for {method}, got {n_masks!r}")
        if sparsity is None or not 0 < sparsity < 1:
            raise ValueError(f"sparsity must lie in (0, 1) for {method}, got {sparsity!r}")
    return spec.design(n_heads, n_masks, sparsity, np.random.default_rng(random_state))
