"""Deltas: the change in a score after ablating heads, against the model's unablated baseline.

The tables and the figures take every change from here (:func:`deltas` for the searches' top heads,
:func:`shared_heads` for universal and knowledge heads), so that each is baselined and oriented the
same way; what the evaluations frame holds and the checks on it are :mod:`headloc.report.frames`.

Every delta is oriented by its eval task's direction, so that a negative delta always means the
ablation made the task worse: ``delta = sign * (score(k) - score(0))`` with ``sign = +1`` for a
higher-is-better metric and ``-1`` for a lower-is-better one (a perplexity that rises by 3 is a
delta of -3). Delta Task and Delta Gen follow the paper (section 5, Table 2 caption) on these
oriented deltas. For one run (``model, task, search``) after ablating its top ``k`` heads::

    delta_task = delta(eval_task == task, k)
    delta_gen  = mean over eval_task != task of delta(eval_task, k)

so that Delta Gen never averages a worsening of one task with an improvement of another as if
they were the same. The baseline ``score(eval_task, 0)`` is shared by every run of a model: it is
the mean of that model's ``k == 0`` rows for the eval task (they are copies of one unablated
evaluation).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from headloc.heads import parse_head
from headloc.report.capabilities import capabilities_of, capability_map
from headloc.report.frames import (
    RUN_KEYS, SHARED_EVALS_NEED, TASK_EVALS_NEED, check_columns, kind_rows, sort_first_seen, task_runs
)

DELTA_COLUMNS = ("capability", *RUN_KEYS, "k", "score", "delta_task", "delta_gen")


def baselines(evals: pd.DataFrame) -> pd.Series:
    """Unablated score per (model, eval_task): the mean of every ``k == 0`` row.

    Examples
    --------
    >>> evals = pd.DataFrame({"model": "m", "k": [0, 0, 1], "eval_task": ["a", "a", "a"],
    ...                       "score": [70.0, 70.0, 50.0]})
    >>> baselines(evals).to_dict()
    {('m', 'a'): 70.0}
    """
    rows = evals[evals["k"] == 0]
    return rows.groupby(["model", "eval_task"])["score"].mean()


def check_baselines(rows: pd.DataFrame, baseline: pd.Series) -> None:
    """Raise ValueError naming each (model, eval_task) of ``rows`` that ``baseline`` lacks.

    Examples
    --------
    >>> base = pd.Series({("m", "a"): 70.0})
    >>> check_baselines(pd.DataFrame({"model": ["m", "m"], "eval_task": ["a", "b"]}), base)
    Traceback (most recent call last):
    ...
    ValueError: no baseline (k = 0) rows for model 'm' eval_task 'b'; every delta needs one
    """
    pairs = rows[["model", "eval_task"]].drop_duplicates()
    if pairs.empty:
        return
    known = pd.MultiIndex.from_frame(pairs).isin(baseline.index)
    if not known.all():
        lacking = pairs[~known].itertuples(index=False)
        names = ", ".join(f"model {m!r} eval_task {t!r}" for m, t in lacking)
        raise ValueError(f"no baseline (k = 0) rows for {names}; every delta needs one")


def directions(rows: pd.DataFrame) -> pd.Series:
    """+1 for each row of a higher-is-better eval task, -1 for a lower-is-better one (the
    ``higher_is_better`` column); ValueError naming an eval task whose direction is not a boolean.

    Examples
    --------
    >>> directions(pd.DataFrame({"eval_task": ["acc", "ppl"], "higher_is_better": [True, False]})).tolist()
    [1.0, -1.0]
    """
    check_columns(rows, ["eval_task", "higher_is_better"], "evals")
    valid = rows["higher_is_better"].map(lambda value: isinstance(value, (bool, np.bool_)))
    if not valid.all():
        bad = rows[~valid].iloc[0]
        raise ValueError(f"evals: eval_task {bad['eval_task']!r} has higher_is_better {bad['higher_is_better']!r}; "
                         "expected True or False (its metric's direction)")
    return rows["higher_is_better"].map({True: 1.0, False: -1.0}).astype(float)


def with_delta(rows: pd.DataFrame, baseline: pd.Series) -> pd.DataFrame:
    """``rows`` plus a ``delta`` column: score minus the model's baseline on the eval task, oriented
    by the eval task's direction (:func:`directions`): negative means worse.

    Raises ValueError as :func:`check_baselines` and :func:`directions` do.

    Examples
    --------
    >>> rows = pd.DataFrame({"model": "m", "eval_task": ["a", "a", "ppl", "ppl"], "k": [0, 1, 0, 1],
    ...                      "score": [70.0, 52.5, 20.0, 23.0], "higher_is_better": [True, True, False, False]})
    >>> with_delta(rows, baselines(rows))["delta"].tolist()
    [0.0, -17.5, 0.0, -3.0]
    """
    check_baselines(rows, baseline)
    rows = rows.copy()
    change = rows["score"] - rows.join(baseline.rename("_base"), on=["model", "eval_task"])["_base"]
    rows["delta"] = change * directions(rows) + 0.0  # + 0.0: an unchanged lower-is-better score is 0, not -0
    return rows


def deltas(
    evals: pd.DataFrame, *, gen_tasks: Iterable[str] | None = None, method: str | None = None,
    kind: str = "task",
) -> pd.DataFrame:
    """Score, Delta Task and Delta Gen for every run and number of ablated heads.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame with at least ``model, task, method, search, k, eval_task,
        score``; only ``kind == "task"`` rows are used when there is a ``kind`` column.
    gen_tasks : iterable of str, optional
        The eval tasks that make up "general ability" (the paper uses HellaSwag, BoolQ, ARC
        Challenge and MMLU). Default: every eval task of the run other than its own task.
    method : str, optional
        Keep only the searches of this method (default: every method).
    kind : str, default "task"
        The selections used: ``"task"`` (universal heads filtered when the run filters them) or
        ``"unfiltered"`` (each search's own top heads).

    Returns
    -------
    DataFrame
        Columns ``capability, model, task, method, search, k, score, delta_task, delta_gen``;
        one row per (model, task, search, k), sorted by capability, model, task and search
        (each in order of first appearance), then k. ``score`` is the score on the run's own
        task; ``delta_gen`` is NaN when the run has no other eval task. Empty (with these
        columns) when ``evals`` has no task rows.

    Raises
    ------
    ValueError
        If a required column is missing, a (model, eval_task) has no ``k == 0`` row, or
        ``method`` has no searches while others do.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> deltas(evals)[["k", "score", "delta_task", "delta_gen"]]
       k  score  delta_task  delta_gen
    0  0   80.0         0.0        0.0
    1  1   50.0       -30.0       -1.0
    """
    rows_of_runs = task_runs(evals, method, "deltas", kind=kind)
    if rows_of_runs.empty:
        return pd.DataFrame(columns=list(DELTA_COLUMNS))
    rows = rows_of_runs.loc[:, list(TASK_EVALS_NEED)].copy()
    rows["own"] = rows["eval_task"] == rows["task"]
    if gen_tasks is not None:
        rows = rows[rows["own"] | rows["eval_task"].isin(list(gen_tasks))]
    rows = with_delta(rows, baselines(rows))

    keys = [*RUN_KEYS, "k"]
    own = rows[rows["own"]].groupby(keys)[["score", "delta"]].mean()
    gen = rows[~rows["own"]].groupby(keys)["delta"].mean().rename("delta_gen")
    out = rows[keys].drop_duplicates().join(own, on=keys).join(gen, on=keys)
    out = out.rename(columns={"delta": "delta_task"})
    out.insert(0, "capability", capabilities_of(out["task"], capability_map(rows_of_runs)))
    out = sort_first_seen(out, ["capability", "model", "task", "search"], then=["k"])
    return out[list(DELTA_COLUMNS)]


def headset_key(headset: str) -> list[tuple[int, int]]:
    """Sort key of a head set name (``"L1H2+L3H4"``): its heads as (layer, head) pairs.

    Examples
    --------
    >>> sorted(["L10H0", "L2H5", "L2H1"], key=headset_key)
    ['L2H1', 'L2H5', 'L10H0']
    """
    return [parse_head(head) for head in str(headset).split("+")]


def shared_heads(evals: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Ablated rows of one shared-head ``kind`` with a ``delta`` column, and (model, head) pairs.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame with at least ``model, k, headset, eval_task, score``.
    kind : str
        ``"universal"`` or ``"knowledge"``.

    Returns
    -------
    (DataFrame, list of (str, str))
        The ``k > 0`` rows of ``kind`` with their delta against the model's ``k == 0`` rows
        (of any kind), and the (model, head set) pairs: models in order of first appearance,
        heads sorted by (layer, head). Both empty when ``kind`` has no ablated rows.

    Examples
    --------
    >>> evals = pd.DataFrame({"model": "m", "higher_is_better": True, "kind": "universal", "k": [0, 1, 1],
    ...                       "headset": ["none", "L2H0", "L1H3"], "eval_task": "a",
    ...                       "score": [70.0, 60.0, 65.0]})
    >>> rows, pairs = shared_heads(evals, "universal")
    >>> pairs, rows["delta"].tolist()
    ([('m', 'L1H3'), ('m', 'L2H0')], [-10.0, -5.0])
    """
    check_columns(evals, SHARED_EVALS_NEED, "evals")
    rows = kind_rows(evals, kind)
    ablated = rows[rows["k"] > 0]
    if ablated.empty:
        return ablated, []
    base_rows = evals[(evals["k"] == 0) & evals["model"].isin(set(ablated["model"]))]
    rows = with_delta(ablated, baselines(base_rows))
    pairs = []
    for model in pd.unique(rows["model"]):
        heads = pd.unique(rows.loc[rows["model"] == model, "headset"])
        pairs += [(model, head) for head in sorted(heads, key=headset_key)]
    return rows, pairs
