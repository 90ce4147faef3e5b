"""What the jobs of one search are told and read: which searches a rule runs, the per-chunk files of
a design, the files rule recover_heads reads, and each step's parameters (:mod:`headloc.methods.kinds`).

Its own module because it turns the plan's searches into the arguments of single jobs, while
:mod:`headloc.workflow.plan` says which searches there are. :class:`PlanSteps` is mixed into
:class:`~headloc.workflow.plan.Plan` and reads its attributes: ``settings``, ``task_settings`` and
``searches``, and its :meth:`~headloc.workflow.plan.Plan.search`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from headloc import methods
from headloc.methods.kinds import SearchFiles
from headloc.methods.settings import SearchSpec
from headloc.workflow import paths


class PlanSteps:
    """The jobs' side of a :class:`~headloc.workflow.plan.Plan`, mixed into it (see the module)."""

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
