"""What the collected tables and the report ask of the plan: which searches and head sets each
collected table (:data:`headloc.collected.COLLECTIONS`) needs, which selections it keeps, where it
lives (under the config's digest), how each task's scores are shown, and the report's options.

Its own module because it reads the plan from the tables' end, while :mod:`headloc.workflow.plan`
says which searches run. :class:`PlanTables` is mixed into :class:`~headloc.workflow.plan.Plan` and
reads its attributes: ``config``, ``models``, ``tasks``, ``localized``, ``searches``,
``capabilities``, ``top_k``, ``main_method`` and ``digest``, and its
:meth:`~headloc.workflow.plan.Plan.main_search`, :meth:`~headloc.workflow.plan.Plan.main_searches`
and :meth:`~headloc.workflow.plan.Plan.id_scoring`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from headloc.collected import COLLECTIONS
from headloc.heads import format_headset
from headloc.workflow import paths
from headloc.workflow.selection import select_heads, with_universal


class PlanTables:
    """The collected tables' side of a :class:`~headloc.workflow.plan.Plan`, mixed into it (see the module)."""

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
