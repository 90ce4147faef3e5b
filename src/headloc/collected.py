"""The collected tables: the one registry of their names and what each one is.

A collected table gathers one kind of finished result of a whole run (every model's geometry, the
tuning grid, the searches' recovered heads, or the full-data evaluations of some head selections)
into one tab-separated file, ``results/runs/<config digest>/<name>.tsv``. The workflow makes them
(:class:`headloc.workflow.plan.Plan` says which searches and head sets each needs), the paper's
tables and figures read them (each :class:`headloc.report.TableSpec` names its ``inputs`` here),
and the published ones are copied to ``results/tables/`` for users. Every part asks this registry
instead of spelling a name list of its own.

>>> [name for name, c in COLLECTIONS.items() if c.holds == "recoveries"]
['recoveries_main', 'recoveries']
>>> published()
['recoveries', 'evals_all']
"""

from __future__ import annotations

from dataclasses import dataclass

#: The head selections a collected evals table may hold (see headloc.workflow.selection.select_heads):
#: a search's top k ("task"), its top k with the universal heads kept ("unfiltered"), each universal
#: or knowledge head alone, and the config's extra head sets.
HEAD_SELECTIONS = ("task", "unfiltered", "universal", "knowledge", "extra")


@dataclass(frozen=True)
class Collection:
    """One collected table.

    ``holds`` is what one of its rows is: "models", "tuning", "recoveries" or "evals".
    ``methods`` is "main" (the searches of ``validation.method`` only) or "all" (every method's);
    ``heads`` (evals only) the head selections whose evaluations it holds (:data:`HEAD_SELECTIONS`);
    ``runs`` what it makes the workflow run (docs/targets.md says it per target); ``published``
    whether a copy goes to ``results/tables/<name>.tsv``.
    """

    name: str
    holds: str
    methods: str = "main"
    heads: tuple[str, ...] = ()
    runs: str = ""
    published: bool = False

    @property
    def needs_searches(self) -> bool:
        return self.holds in ("recoveries", "evals")


COLLECTIONS = {c.name: c for c in (
    Collection("models", "models", runs="model configs only"),
    Collection("tuning", "tuning", runs="the tuning grid's searches and their top-k checks"),
    Collection("recoveries_main", "recoveries", "main", runs="the main method's searches"),
    Collection("recoveries", "recoveries", "all", runs="every method's searches", published=True),
    Collection("evals_main", "evals", "main", ("task",),
               runs="the main method's searches, full-data validation of their top-k"),
    Collection("evals_methods", "evals", "all", ("task", "unfiltered"),
               runs="every method's searches, full-data validation of their top-k (filtered and unfiltered)"),
    Collection("evals_universal", "evals", "main", ("universal",),
               runs="the main method's searches, universal heads validated alone"),
    Collection("evals_knowledge", "evals", "main", ("knowledge",),
               runs="the main method's searches, knowledge heads validated alone"),
    Collection("evals_all", "evals", "all", HEAD_SELECTIONS,
               runs="every method's searches, full-data validation of every head selection", published=True),
)}


def holding(what: str) -> list[str]:
    """The names of the collected tables whose rows are ``what`` ("recoveries", "evals", ...)."""
    return [name for name, collection in COLLECTIONS.items() if collection.holds == what]


def published() -> list[str]:
    """The names of the collected tables copied to ``results/tables/``."""
    return [name for name, collection in COLLECTIONS.items() if collection.published]
