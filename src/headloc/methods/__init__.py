"""Search methods: one module each, and the registry that every consumer reads.

Each module of this package declares its methods in a ``METHODS`` tuple of
:class:`~headloc.methods.contract.Method`, but the machinery: :mod:`~headloc.methods.contract`
(the contract), :mod:`~headloc.methods.registry` (which finds the methods),
:mod:`~headloc.methods.settings` (the typed search settings and method options),
:mod:`~headloc.methods.kinds` (one module per kind: the steps that run its methods, one per rule),
:mod:`~headloc.methods.steps` (the recovery every kind ends with),
:mod:`~headloc.methods.reads` (which search keys a method reads) and
:mod:`~headloc.methods.driver` (a kind's steps in one process). Adding a method is adding a module
(docs/methods.md, "Adding a method"). The plan, the rules and scripts, the config schema's enums,
the report and the benchmarks ask the registry, never a method's name.

>>> get("cs_stratified").kind.name, get("cs_stratified").nested
('masks', True)
>>> "greedy" in names() and REFERENCE in names()
True
>>> get("lasso")
Traceback (most recent call last):
...
ValueError: unknown search method 'lasso'; known: attribution, chg, cs_stratified, cs_bernoulli, cs_adaptive, greedy, greedy1s...
"""

from __future__ import annotations

from headloc.methods.contract import Method, SearchParts
from headloc.methods.kinds.masks import make_masks
from headloc.methods.registry import get, names, registry

__all__ = ["REFERENCE", "Method", "SearchParts", "get", "make_masks", "names", "registry"]

REFERENCE = "greedy"  # the method the efficiency benchmarks and Table 4's recall measure the others against
