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

import json
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


def percent(value: float) -> str:
    """A share as a whole percentage; "-" for NaN."""
    return "-" if pd.isna(value) else f"{round(100 * value)}%"  # an int: no "-0%"


def curve_table(points: pd.DataFrame) -> str:
    """Markdown: every :func:`efficiency_points` row, Delta Task of the top k against the budget."""
    lines = ["| model | task | method | y | budget | evals | seeds | Delta Task mean +- sd | min..max | of greedy "
             "| seeds >= share |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in points.itertuples(index=False):
        sd = "" if pd.isna(r.sd) else f" +- {r.sd:.1f}"
        lines.append(f"| {r.model} | {r.task} | {r.method} | {r.y} | {r.budget} | {r.n_evals:.0f} | {r.seeds} | "
                     f"{r.mean:.1f}{sd} | {r.min:.0f}..{r.max:.0f} | {percent(r.share_of_greedy)} | "
                     f"{r.seeds_reaching}/{r.seeds} |")
    return "\n".join(lines)


def summary_table(best: pd.DataFrame, share: float, target: float) -> str:
    """Markdown: every :func:`smallest_budgets` row, and whether its evaluations are at most
    ``target`` of greedy's (the goal)."""
    lines = [f"| model | task | method | y | smallest budget at {percent(share)} of greedy | evals | Delta Task mean +- sd "
             f"(greedy) | seeds reaching | / greedy's evals | <= {percent(target)}? |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in best.itertuples(index=False):
        reached = not pd.isna(r.budget)
        sd = "" if pd.isna(r.sd) else f" +- {r.sd:.1f}"
        budget = f"{r.budget:.0f}" if reached else f"none (best {percent(r.share_of_greedy)})"
        ratio = f"{r.ratio_to_greedy:.3f}" if reached else "-"
        meets = "yes" if reached and r.ratio_to_greedy <= target else "no"
        lines.append(f"| {r.model} | {r.task} | {r.method} | {r.y} | {budget} | {r.n_evals:.0f} | {r.mean:.1f}{sd} "
                     f"({r.greedy:.1f}) | {r.seeds_reaching}/{r.seeds} | {ratio} | {meets} |")
    return "\n".join(lines)


def efficiency_report(table4: pd.DataFrame, share: float, target: float, universal: dict) -> tuple[str, dict]:
    """The markdown report and its JSON record of merged Table 4s (with :func:`search_fields`
    columns): the universal heads each run filtered, the curve of every method, and its smallest
    budget at ``share`` of greedy's Delta Task against the goal (``target`` of greedy's evaluations)."""
    points = efficiency_points(table4, share)
    best = smallest_budgets(points, share)
    text = "\n\n".join([
        f"Universal heads filtered (per config and model): {universal}",
        "Delta Task of the top k (points) against the budget, over seeds:", curve_table(points),
        f"Smallest budget whose mean Delta Task reaches {percent(share)} of greedy's:",
        summary_table(best, share, target)])
    record = {"share": share, "universal": universal, "points": json.loads(points.to_json(orient="records")),
              "smallest_budgets": json.loads(best.to_json(orient="records"))}
    return text, record
