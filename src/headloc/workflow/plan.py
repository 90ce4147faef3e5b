"""The experiment plan: what a validated config asks the workflow to compute, as plain data.

A :class:`Plan` answers every "which" question of the workflow without Snakemake: which searches
run on which task (and under which directory name), which searches and head sets each collected
table (:data:`headloc.collected.COLLECTIONS`) needs, and under which digest the collected tables of
this config live. ``rules/common.smk`` turns these answers into input
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from headloc import methods
from headloc.collected import COLLECTIONS
from headloc.heads import format_headset
from headloc.methods.kinds import SearchFiles
from headloc.methods.settings import SearchSpec
from headloc.workflow import paths
from headloc.workflow.configured import searched_tasks, task_settings
from headloc.workflow.selection import select_heads, with_universal

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


class Plan:
    """Everything a validated config (defaults filled in) asks for; pure, no file access."""

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

    def searches_run_by(self, rule: str) -> set[str]:
        """The ids of every search whose kind runs its job in ``rule`` (:attr:`headloc.methods.kinds.Kind.rule`)."""
        return {s.id for searches in self.searches.values() for s in searches.values()
                if methods.get(s.method).kind.rule == rule}

    def chunk_files(self, pattern: str, **fields) -> list[str]:
        """A per-chunk pattern for each of the ``search.chunks`` scoring jobs of a design."""
        return [pattern.format(chunk=chunk, **fields) for chunk in range(self.settings.chunks)]

    def recovery_inputs(self, model: str, task: str, search_id: str, model_input: Sequence[str] = ()) -> dict:
        """The files rule recover_heads reads for one search, as its method's kind names them (in the
        search's folder, or in the folder of the search whose rows it reuses), as named inputs."""
        search = self.search(task, search_id)
        folder = paths.SEARCH.format(model=model, task=task, search=search.rows_of or search.id)
        files = SearchFiles(folder, self.settings.chunks)
        kind = methods.get(search.method).kind
        return kind.recovery_inputs(files, self.search_spec(task, search_id), model_input).named()

    # ------------------------------------------------------------ each step's parameters (headloc.methods.kinds)

    def search_spec(self, task: str, search_id: str, *, higher_is_better: bool = True) -> SearchSpec:
        """One search as its steps see it: its method and settings (its own n_masks, seed and
        sparsity), the scored metric's direction and, for a nested budget, the rows it fits."""
        search = self.search(task, search_id)
        settings = replace(self.task_settings.get(task, self.settings), n_masks=search.n_masks, seed=search.seed,
                           sparsity=search.sparsity)
        return SearchSpec(methods.get(search.method), settings, higher_is_better,
                          nested_rows=search.n_masks if search.of else None)

    def step_params(self, task: str, search_id: str, step: str, *, higher_is_better: bool = True):
        """What ``step`` of the search's kind is told (its parameters' dataclass); ``higher_is_better``,
        the scored metric's direction, is a fact of the task's YAML
        (:class:`headloc.workflow.facts.TaskFacts`), recorded in recovery.json."""
        search = self.search_spec(task, search_id, higher_is_better=higher_is_better)
        return search.method.kind.params(step, search)

    def searches_of(self, collection: str) -> list[tuple[str, str]]:
        """(task, search id) of every search a collected table needs (none for models and tuning).

        The main method's searches of every task are always among them: universal heads, which every
        table filters, are detected on them.
        """
        wanted = COLLECTIONS[collection]
        if not wanted.needs_searches:
            return []
        if wanted.methods == "main":
            return self.main_searches()
        return [(task, search) for task in self.localized for search in self.searches[task]]

    def main_searches(self) -> list[tuple[str, str]]:
        """(task, search id) of the main method's search on every searched task."""
        return [(task, self.main_search(task)) for task in self.localized]

    # ------------------------------------------------------------ head selections

    def selection_options(self) -> dict:
        """What :func:`headloc.workflow.results.selections` needs to pick the reported heads."""
        config = self.config
        return {
            "main": {task: self.main_search(task) for task in self.localized},
            "capabilities": self.capabilities,
            "k": self.top_k,
            "universal": config["universal"],
            "knowledge": {key: config["knowledge"][key] for key in ("tasks", "top_n", "min_tasks")},
            "extra": config["validation"]["headsets"],
        }

    def headsets(self, collection: str, rankings: Mapping[tuple[str, str], Sequence[str]],
                 model: str | None = None, universal: Sequence[str] | None = None) -> list[str]:
        """Head sets of one model a collected evals table needs: the baseline ("none"), then per the
        collection's head selections the cumulative top 1..k of each main-method search and the top k of
        every other search (and its unfiltered top k when the universal filter is on), each
        universal and knowledge head alone, and the extra head sets. ``rankings`` maps (task,
        search id) to the recovered ranking of every search in :meth:`searches_of` of ``model``;
        ``universal``: its universal heads as rule universal_heads found them (None: as the
        rankings and ``universal.heads`` say)."""
        wanted = COLLECTIONS[collection].heads
        options = self.selection_options()
        if universal is not None:
            options = with_universal(options, {model: universal})
        selected = select_heads(rankings, options["main"], self.capabilities, k=self.top_k,
                                universal=options["universal"], knowledge=options["knowledge"], model=model)
        sets = {"none"}
        if "task" in wanted:
            for (task, search), heads in selected["task"].items():
                cumulative = options["main"].get(task) == search
                sets.update(format_headset(heads[:k]) for k in (range(1, len(heads) + 1) if cumulative
                                                                 else [len(heads)]) if k)
        if "unfiltered" in wanted and options["universal"]["filter"]:
            sets.update(format_headset(heads) for heads in selected["unfiltered"].values() if heads)
        for alone in ("universal", "knowledge"):
            if alone in wanted:
                sets.update(selected[alone])
        if "extra" in wanted:
            sets.update(format_headset(spelling.split("+")) for spelling in options["extra"])
        return sorted(sets)

    # ------------------------------------------------------------ collected tables and targets

    def collected_path(self, collection: str) -> str:
        """Where this config's collected table lives (under its digest)."""
        if collection not in COLLECTIONS:
            raise KeyError(f"unknown collected table {collection!r}; known: {', '.join(COLLECTIONS)}")
        return paths.COLLECTED.format(digest=self.digest, collection=collection)

    def relative_tasks(self) -> list[str]:
        return [task for task in self.tasks if self.config["tasks"][task]["relative"]]

    def unit(self, task: str, *, scoring: bool = False) -> str:
        """How the task's scores are shown (:func:`headloc.data.units.display_score`): percent of
        the unablated score for a relative task, percent (changes in percentage points) for a metric
        that is a fraction in [0, 1] (:data:`headloc.data.units.FRACTION_METRICS`), else the
        metric's own unit. ``scoring``: of the metric the searches score (id_metric)."""
        from headloc.data.units import display_unit

        metric = self.id_scoring(task)[1] if scoring else self.config["tasks"][task]["metric"]
        return display_unit(metric, relative=self.config["tasks"][task]["relative"])

    def units(self) -> dict[str, str]:
        """Every task's display unit (:meth:`unit`)."""
        return {task: self.unit(task) for task in self.tasks}

    def report_options(self, directions: Mapping[str, bool] | None = None) -> dict:
        """The fields of :class:`headloc.report.ReportOptions` for this run; ``directions`` (task ->
        higher_is_better, :meth:`headloc.workflow.facts.TaskFacts.directions`, read from the task
        YAMLs, which this plan does not read) let the captions say which changes are sign-flipped."""
        report, knowledge = self.config["report"], self.config["knowledge"]
        searched = [self.capabilities[task] for task in self.localized]
        gen_tasks = self.config["validation"]["gen_tasks"]
        if gen_tasks is None and any(self.unit(task) == "own" for task in self.tasks):
            # Delta Gen averages changes in percent: a task in its own unit (a perplexity) stays out
            gen_tasks = [task for task in self.tasks if self.unit(task) != "own"]
        return {
            "top_k": self.top_k,
            "gen_tasks": gen_tasks,
            "method": self.main_method,
            "capabilities": self.capabilities,
            "knowledge_tasks": knowledge["tasks"],
            "knowledge_eval_tasks": knowledge["eval_tasks"],
            "figure_model": report["model"] or self.models[0],
            "figure_capability": report["capability"] or (searched[0] if searched else None),
            "units": {task: [self.unit(task), self.config["tasks"][task]["metric"]] for task in self.tasks},
            "directions": dict(directions or {}),
            "methods": list(dict.fromkeys(s.method for task in self.localized for s in self.searches[task].values())),
        }


def in_collection(collection: str, selection: Mapping, main_method: str) -> bool:
    """Whether a selection (a row of :func:`headloc.workflow.results.selections`) belongs in a collected
    evals or recoveries table. (A selection's ``"kind"``, the column of that name in the collected
    tables, is its head selection: one of :data:`headloc.collected.HEAD_SELECTIONS`.)

    >>> in_collection("evals_main", {"kind": "task", "method": "greedy"}, "cs_stratified")
    False
    >>> in_collection("evals_all", {"kind": "universal", "method": ""}, "cs_stratified")
    True
    """
    wanted = COLLECTIONS[collection]
    if wanted.holds == "evals" and selection["kind"] not in wanted.heads:
        return False
    if wanted.holds == "recoveries" and selection["kind"] == "unfiltered":
        return False  # a recoveries row holds the task heads (and the ranking itself)
    if selection["kind"] not in ("task", "unfiltered") or wanted.methods == "all":
        return True
    return selection["method"] == main_method


def collection_selections(collection: str, recoveries: Sequence[dict], options: Mapping,
                          main_method: str) -> list[dict]:
    """The selections (:func:`headloc.workflow.results.selections` with ``options``) a collected table keeps."""
    from headloc.workflow.results import selections  # pandas (~0.3 s): only the collect jobs call this

    return [s for s in selections(recoveries, **options) if in_collection(collection, s, main_method)]


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
