"""Search methods: one module each, and the registry that every consumer reads.

Each module of this package (but :mod:`~headloc.methods.contract`, which defines the contract, and
:mod:`~headloc.methods.driver`, which runs any method in one process) declares its methods in a ``METHODS`` tuple of :class:`~headloc.methods.contract.Method`; the
registry finds them the way scikit-learn's ``all_estimators()`` finds estimators, so adding a method
is adding a module (docs/methods.md, "Adding a method"). The plan, the rules and scripts, the
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

import importlib
import pkgutil

import numpy as np

from headloc.methods.contract import KINDS, Method, SearchParts

__all__ = ["KINDS", "REFERENCE", "Method", "SearchParts", "get", "make_masks", "names", "registry"]

REFERENCE = "greedy"  # the method the efficiency benchmarks and Table 4's recall measure the others against
_REGISTRY: dict[str, Method] = {}


def registry() -> dict[str, Method]:
    """Every method of every module of this package, by name, in module order."""
    if not _REGISTRY:
        for module in pkgutil.iter_modules(__path__):
            if module.name in ("contract", "driver"):
                continue
            for method in importlib.import_module(f"{__name__}.{module.name}").METHODS:
                if method.name in _REGISTRY:
                    raise ValueError(f"search method {method.name!r} declared twice (in {module.name})")
                _REGISTRY[method.name] = method
    return _REGISTRY


def names(*, kind: str | None = None) -> list[str]:
    """The registered methods' names (of one kind only, if given)."""
    return [name for name, method in registry().items() if kind is None or method.kind == kind]


def get(name: str) -> Method:
    """A method by name; ValueError naming the known ones if there is none."""
    try:
        return registry()[name]
    except KeyError:
        raise ValueError(f"unknown search method {name!r}; known: {', '.join(registry())}") from None


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
