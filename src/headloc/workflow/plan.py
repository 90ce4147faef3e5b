"""The experiment plan: what a validated config asks the workflow to compute, as plain data.

A :class:`Plan` answers every "which" question of the workflow without Snakemake: which searches
run on which task (and under which directory name), which searches and head sets each collected
table (:data:`headloc.collected.COLLECTIONS`) needs, and under which digest the collected tables of
this config live. The searches are named here; what their jobs are told is
:mod:`headloc.workflow.plan_steps`, what the collected tables need :mod:`headloc.workflow.plan_tables`,
both mixed into :class:`Plan`. ``rules/common.smk`` turns these answers into input
functions; the tests ask them directly.

Staleness. Per-search files are named by everything that changes them (:meth:`Plan.search_id`),
evaluations by (model, task, head set) and re-run by Snakemake when their parameters, inputs or
code change. Collected tables are the one place where results of many configs could mix: they live
under ``results/runs/{digest}/``, where ``digest`` hashes the whole validated config
(:func:`config_digest`), so a changed config never reads another config's collection, and going
back to an old config finds its own collection again (re-made only if something upstream changed).

>>> plan = Plan({"models": {"m": {}}, "tasks": {"ioi": {"localize": True, "capability": None,
...     "id_docs": None, "search": {}, "lm_eval_task": "headloc_ioi", "metric": "acc"}}, "search": {"methods": ["cs_stratified", "greedy"],
...     "n_masks": 100, "sparsity": 0.05, "id_docs": 20, "seed": 0},
...     "validation": {"top_k": 5, "method": "cs_stratified"}, "tuning": {"tasks": []}})
>>> list(plan.searches["ioi"])
['cs_stratified_m100_p0.05_n20_s0', 'greedy_k5_n20_s0']
>>> plan.main_search("ioi")
'cs_stratified_m100_p0.05_n20_s0'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from headloc import methods
from headloc.workflow.configured import searched_tasks, task_settings
from headloc.workflow.plan_steps import PlanSteps
from headloc.workflow.plan_tables import PlanTables

DIGEST_LENGTH = 12



@dataclass(frozen=True)
class Search:
    """One search: its method and the parameters that change its result.

    ``seed`` seeds its masks (and the Lasso's cross-validation folds): the config's ``search.seed``
    for repeat 0, ``seed + repeat`` for the further repeats of a random method. ``rows_of`` names
    the search whose masks and scores it reuses instead of scoring its own: a smaller budget of
    ``search.budgets`` reads the first ``n_masks`` rows of the full design's (nested designs), and
    one-shot greedy reads greedy's round 1 (the same matrix) when greedy runs too.
    """

    task: str
    id: str
    method: str
    n_masks: int
    sparsity: float
    seed: int = 0
    repeat: int = 0
    rows_of: str | None = None
    of: int | None = None  # a nested budget: the size of the full design it is cut from

    def grid_point(self) -> dict:
        """The search as a point of the tuning grid (what rule score_top_heads records)."""
        return {"method": self.method, "n_masks": self.n_masks, "sparsity": self.sparsity}


def config_digest(config: Mapping) -> str:
    """A short hash of a validated config (defaults filled in): equal configs, equal digests.

    >>> config_digest({"a": 1, "b": [1, 2]}) == config_digest({"b": [1, 2], "a": 1})
    True
    >>> config_digest({"a": 1}) == config_digest({"a": 2})
    False
    """
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


class Plan(PlanSteps, PlanTables):
    """Everything a validated config (defaults filled in) asks for; pure, no file access. What each
    search's jobs are told is :class:`~headloc.workflow.plan_steps.PlanSteps`'s, what the collected
    tables and the report need :class:`~headloc.workflow.plan_tables.PlanTables`'s."""

    def __init__(self, config: Mapping):
        self.config = config
        self.models = list(config["models"])
        self.tasks = list(config["tasks"])  # every task is evaluated when validating
        self.localized = searched_tasks(config)  # and these searched
        self.settings = task_settings(config)  # the search section; each searched task's own:
        self.task_settings = {task: task_settings(config, task) for task in self.localized}
        self.capabilities = {t: config["tasks"][t]["capability"] or t for t in self.tasks}
        self.top_k = config["validation"]["top_k"]
        self.main_method = config["validation"]["method"]
        self.seed = self.settings.seed
        self.digest = config_digest(config)
        if methods.get(self.main_method).excludes_universal and self.universal_filter:
            raise ValueError(f"config validation.method: {self.main_method!r} with universal.filter on would wait "
                             f"on itself ({self.main_method} leaves out the universal heads, which are found on the "
                             "main method's rankings); expected another main method, or universal.filter: false")
        self.searches = {task: self._searches(task) for task in self.localized}
        self.tuning = {task: self._tuning(task) for task in config["tuning"]["tasks"]}

    # ------------------------------------------------------------ searches

    def id_docs(self, task: str) -> int:
        """Identification subset size: the task's own, or the search default."""
        return self.config["tasks"][task]["id_docs"] or self.settings.id_docs

    def id_scoring(self, task: str) -> tuple[str, str]:
        """The (lm-eval task, metric) that scores masks on a task's identification subset."""
        spec = self.config["tasks"][task]
        return spec.get("id_task") or spec["lm_eval_task"], spec.get("id_metric") or spec["metric"]

    def score_suffix(self, task: str) -> str:
        """``_y<task>-<metric>`` when the search scores with another task or metric than validation
        (tasks.<name>.id_task / id_metric); empty otherwise."""
        scoring = self.id_scoring(task)
        spec = self.config["tasks"][task]
        return "" if scoring == (spec["lm_eval_task"], spec["metric"]) else f"_y{scoring[0]}-{scoring[1]}"

    def search_id(self, task: str, method: str, n_masks: int, sparsity: float, *, repeat: int = 0,
                  of: int | None = None) -> str:
        """Directory name of a search: the method and every parameter that changes its result
        (each method's ``search_id`` in :mod:`headloc.methods` says which).

        Every name ends in the identification subset (``n<docs>_s<seed>``); a method that scores masks
        adds the scoring task and metric when they are not the task's own. A compressed-sensing budget
        read from the first rows of a larger design says so (``m25of200``); repeats after the first add
        ``_r<repeat>``; greedy with the universal filter on (``xu``) leaves the universal heads out.
        """
        spec = methods.get(method)
        tail = f"n{self.id_docs(task)}_s{self.seed}"
        if spec.scored:  # the gradient methods always differentiate the gold log-likelihood
            tail += self.score_suffix(task)
        parts = methods.SearchParts(tail=tail, seed=self.seed, n_masks=n_masks, sparsity=sparsity, repeat=repeat,
                                    of=of, top_k=self.top_k, universal_filter=self.universal_filter,
                                    options=self.method_options(method))
        return spec.search_id(parts)

    @property
    def universal_filter(self) -> bool:
        """Whether the universal filter is on (a method that can leave the universal heads out,
        greedy, then does)."""
        return bool(self.config.get("universal", {}).get("filter", False))

    def method_options(self, method: str):
        """A method's options (its config section, e.g. ``chg``: seeds, lam, steps, as a
        :class:`~headloc.methods.settings.MethodOptions`); None for a method that has none."""
        return self.settings.options_of(methods.get(method))

    def _search(self, task, method, n_masks, sparsity, repeat=0, of=None, rows_of=None) -> Search:
        return Search(task, self.search_id(task, method, n_masks, sparsity, repeat=repeat, of=of), method,
                      n_masks, sparsity, seed=self.seed + repeat, repeat=repeat, rows_of=rows_of, of=of)

    def _searches(self, task: str) -> dict[str, Search]:
        """Every search of a task: each method once, a random method once per repeat, and a method
        with a budget once per budget too (nested budgets read the first rows of the full design)."""
        settings = self.task_settings[task]
        names, n_masks, sparsity = settings.methods, settings.n_masks, settings.sparsity
        found = []
        for name in names:
            method = methods.get(name)
            for repeat in range(settings.repeats if method.repeats else 1):
                full = self._search(task, name, n_masks, sparsity, repeat)
                found.append(full)
                for budget in sorted(settings.budgets) if method.budgeted else []:
                    nested = {"of": n_masks, "rows_of": full.id} if method.nested else {}
                    found.append(self._search(task, name, budget, sparsity, repeat, **nested))
        for name in names:  # reuse another method's rows when it runs too (one-shot greedy: greedy's round 1)
            source = methods.get(name).rows_from
            if source and source[0] in names:
                rows_of = f"{self.search_id(task, source[0], n_masks, sparsity)}/{source[1]}"
                found = [replace(s, rows_of=rows_of) if s.method == name else s for s in found]
        return {s.id: s for s in found}

    def _tuning(self, task: str) -> dict[str, Search]:
        grid = self.config["tuning"]
        found = (self._search(task, grid["method"], m, p) for m in grid["n_masks"] for p in grid["sparsity"])
        return {s.id: s for s in found}

    def search(self, task: str, search_id: str) -> Search:
        """A search of the main plan or the tuning grid; KeyError naming it when unknown."""
        for plan in (self.searches, self.tuning):
            if search_id in plan.get(task, {}):
                return plan[task][search_id]
        raise KeyError(f"no search {search_id!r} on task {task!r} in this config")

    def all_search_ids(self) -> set[str]:
        return {s for plan in (self.searches, self.tuning) for searches in plan.values() for s in searches}

    def main_search(self, task: str) -> str:
        """The search of the main method (validation.method) on a task: its full design, repeat 0."""
        return self.method_search(task, self.main_method, key="validation.method")

    def main_searches(self) -> list[tuple[str, str]]:
        """(task, search id) of the main method's search on every searched task."""
        return [(task, self.main_search(task)) for task in self.localized]

    def method_search(self, task: str, method: str, *, key: str) -> str:
        """The search of ``method`` on a task: its full design, repeat 0; ``key`` is the config key
        that asked for it (named in the error when the method does not run on the task)."""
        for search in self.searches[task].values():
            if search.method == method and search.repeat == 0 and search.of is None:
                return search.id
        raise ValueError(f"config {key}: {method!r} is not among the methods run on "
                         f"task {task!r} ({', '.join(s.method for s in self.searches[task].values())})")

    @property
    def export_method(self) -> str:
        """The method whose searches make the MIB submission: export.mib.method, else the main method."""
        return self.config.get("export", {}).get("mib", {}).get("method") or self.main_method

    def export_searches(self) -> list[tuple[str, str]]:
        """(task, search id) of the MIB submission: the export method's search on every searched task."""
        key = "export.mib.method" if self.export_method != self.main_method else "validation.method"
        return [(task, self.method_search(task, self.export_method, key=key)) for task in self.localized]


def choose_tuning_point(points: Iterable[Mapping]) -> Mapping:
    """The tuning grid point whose top heads degrade the task most (appendix A.1): the lowest
    ``degradation`` of a higher-is-better metric, the highest of a lower-is-better one (a perplexity
    that rises); ties go to the cheaper search: fewer masks, then lower sparsity.

    >>> choose_tuning_point([{"degradation": -5, "n_masks": 200, "sparsity": 0.05, "higher_is_better": True},
    ...                      {"degradation": -5, "n_masks": 100, "sparsity": 0.1, "higher_is_better": True}])["n_masks"]
    100
    >>> choose_tuning_point([{"degradation": -5, "n_masks": 200, "sparsity": 0.05, "higher_is_better": False},
    ...                      {"degradation": 9, "n_masks": 100, "sparsity": 0.1, "higher_is_better": False}])["n_masks"]
    100
    """
    from headloc.io import oriented

    return min(points, key=lambda p: (oriented(p["degradation"], p["higher_is_better"]), p["n_masks"],
                                      p["sparsity"]))
