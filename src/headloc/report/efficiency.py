"""The budget at which each search method matches greedy (benchmarks/search_efficiency.py).

Input is Table 4 (:func:`headloc.report.tables.table4`) of one or several runs, one row per search
with its ``n_evals`` and the ``delta_task`` of its top k on the full data, plus what the run's plan
(a :class:`headloc.workflow.plan.Plan`, passed in) says of each search (:func:`search_fields`): its
budget, its repeat (the mask design) and the score its masks were measured by (``y``: "task", or
the metric of a continuous variant, ``tasks.<name>.id_metric``). Greedy, scored on the task itself, is the
reference: a search *reaches* it when its Delta Task is at least ``share`` of greedy's (both are
drops, so negative numbers).

>>> t4 = pd.DataFrame({"model": "m", "task": "t", "k": 5,
...     "method": ["greedy", "cs_stratified", "cs_stratified", "cs_stratified", "cs_stratified"],
...     "budget": [None, 50, 50, 25, 25], "repeat": [0, 0, 1, 0, 1], "y": "task",
...     "n_evals": [1000, 50, 50, 25, 25], "delta_task": [-80.0, -80.0, -72.0, -40.0, -80.0]})
>>> points = efficiency_points(t4)
>>> print(points[["method", "budget", "seeds", "mean", "share_of_greedy", "seeds_reaching"]].to_string(index=False))
       method  budget  seeds  mean  share_of_greedy  seeds_reaching
cs_stratified      25      2 -60.0             0.75               1
cs_stratified      50      2 -76.0             0.95               1
       greedy    1000      1 -80.0             1.00               1
>>> print(smallest_budgets(points)[["method", "budget", "ratio_to_greedy"]].to_string(index=False))
       method  budget  ratio_to_greedy
cs_stratified      50             0.05
       greedy    1000             1.00
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pandas as pd

from headloc import methods

KEYS = ["model", "task", "method", "y", "budget"]


class SearchPlan(Protocol):
    """What :func:`search_fields` asks of a run's plan (:class:`headloc.workflow.plan.Plan` answers it;
    the report never imports the workflow)."""

    def search(self, task: str, search_id: str): ...

    def score_suffix(self, task: str) -> str: ...

    def id_scoring(self, task: str) -> tuple[str, str]: ...


def search_fields(plan: SearchPlan, task: str, search_id: str) -> dict:
    """A search's ``budget`` (its masks for compressed sensing; None for greedy and the gradient
    methods, whose evaluations are fixed by the model: their ``n_evals`` stands), ``repeat`` and
    ``y``, as the plan of the run that made it says. KeyError naming the search when the plan has
    no such search (a Table 4 from another config)."""
    search = plan.search(task, search_id)
    method = methods.get(search.method)
    continuous = method.scored and plan.score_suffix(task)
    return {"budget": search.n_masks if method.budgeted else None,
            "repeat": search.repeat, "y": plan.id_scoring(task)[1] if continuous else "task"}


def with_search_fields(table4: pd.DataFrame, plan: SearchPlan) -> pd.DataFrame:
    """Table 4 with each row's :func:`search_fields` as columns."""
    fields = pd.DataFrame([search_fields(plan, task, search)
                           for task, search in zip(table4["task"], table4["search"])], columns=["budget", "repeat", "y"])
    return pd.concat([table4.reset_index(drop=True), fields], axis=1)


def efficiency_points(table4: pd.DataFrame, share: float = 0.95) -> pd.DataFrame:
    """From Table 4 rows with :func:`search_fields` columns (:func:`with_search_fields`), one row
    per model, task, method, score (``y``) and budget: the Delta Task of its top k over
    the repeats (``seeds``, ``mean``, ``sd``, ``min``, ``max``), the evaluations used (mean over
    repeats: a settled ``cs_adaptive`` spends less than its budget), ``share_of_greedy`` (the mean
    over greedy's Delta Task) and ``seeds_reaching`` (repeats at ``share`` of greedy or beyond).

    Raises ValueError when a task has no greedy search scored on the task itself, or several.
    """
    rows = table4.reset_index(drop=True).copy()
    rows["budget"] = rows["budget"].fillna(rows["n_evals"]).astype(int)
    greedy = rows[(rows["method"] == methods.REFERENCE) & (rows["y"] == "task")]
    reference = greedy.set_index(["model", "task"])
    if reference.index.has_duplicates:
        raise ValueError(f"several greedy searches per task: {sorted(greedy['search'])}; expected one reference")
    missing = set(zip(rows["model"], rows["task"])) - set(reference.index)
    if missing:
        raise ValueError(f"no greedy search (scored on the task itself) for {sorted(missing)}: it is the "
                         "reference; run a config whose search.methods include greedy")
    rows = rows.join(reference[["delta_task", "n_evals"]].rename(
        columns={"delta_task": "greedy", "n_evals": "greedy_evals"}), on=["model", "task"])
    rows["reaches"] = rows["delta_task"] <= share * rows["greedy"]
    grouped = rows.groupby(KEYS, sort=True)
    points = grouped["delta_task"].agg(seeds="count", mean="mean", sd="std", min="min", max="max")
    points["n_evals"] = grouped["n_evals"].mean()
    points["greedy"] = grouped["greedy"].first()
    points["greedy_evals"] = grouped["greedy_evals"].first()
    points["share_of_greedy"] = (points["mean"] / points["greedy"]).round(6)
    points["seeds_reaching"] = grouped["reaches"].sum().astype(int)
    return points.reset_index()


def smallest_budgets(points: pd.DataFrame, share: float = 0.95) -> pd.DataFrame:
    """Per model, task, method and score: the smallest budget whose mean Delta Task reaches ``share``
    of greedy's, with its spread and its evaluations over greedy's (``ratio_to_greedy``); methods
    that never reach it keep a row with budget NaN and their best share."""
    found = []
    for _, group in points.groupby(KEYS[:-1], sort=True):
        group = group.sort_values("budget")
        reached = group[group["share_of_greedy"] >= share - 1e-9]
        row = (reached.iloc[0] if len(reached) else group.loc[group["share_of_greedy"].idxmax()]).copy()
        if not len(reached):
            row["budget"] = np.nan
        row["ratio_to_greedy"] = round(row["n_evals"] / row["greedy_evals"], 6) if len(reached) else np.nan
        found.append(row)
    return pd.DataFrame(found).reset_index(drop=True)
