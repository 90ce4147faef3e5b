"""Which search keys a method reads, beside those that name every search (``seed``, ``id_docs``,
``top_k``): the workflow's config check notes a key set for methods that do not read it
(:func:`headloc.workflow.method_checks.ignored_notes`).

>>> readers("alpha")
['cs_stratified', 'cs_bernoulli', 'cs_adaptive']
>>> READS["chunks"].lacks
('scores no masks in search.chunks jobs', 'score no masks in search.chunks jobs')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from headloc.methods.contract import SearchParts, lasso_recover
from headloc.methods.registry import get, names


def reads_sparsity(method) -> bool:
    """Whether ``search.sparsity`` changes the method's searches: a search id spells every setting
    that changes a result, so it does where two sparsities give two ids (of any one budget)."""
    parts = [SearchParts(tail="", seed=0, n_masks=100, sparsity=p, options=method.options_of(None)) for p in (0.05, 0.1)]
    return len({method.search_id(part) for part in parts}) == 2


class Reads(NamedTuple):
    """Whether a method reads a key (``reads(method)``); what one that does not lacks, said of one
    method and of several; the name of those that read it, and their verb (one, several)."""

    reads: Callable
    lacks: tuple[str, str]
    readers: str = "the methods that do"
    verb: tuple[str, str] = ("reads", "read")


BUDGET = Reads(lambda m: m.budgeted, ("spends no mask budget", "spend no mask budget"), "the budgeted methods",
               ("spends", "spend"))
READS = {
    "n_masks": BUDGET,
    "budgets": BUDGET,
    "sparsity": Reads(reads_sparsity, ("draws no masks at a sparsity", "draw no masks at a sparsity")),
    "alpha": Reads(lambda m: m.recover is lasso_recover, ("fits no Lasso", "fit no Lasso")),
    "chunks": Reads(lambda m: m.kind.chunked, ("scores no masks in search.chunks jobs",
                                               "score no masks in search.chunks jobs")),
    "repeats": Reads(lambda m: m.repeats, ("draws nothing again per repeat", "draw nothing again per repeat")),
}


def readers(key: str) -> list[str]:
    """Every registered method that reads ``key``, in the registry's order."""
    return [name for name in names() if READS[key].reads(get(name))]
