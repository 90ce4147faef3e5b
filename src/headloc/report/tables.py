"""The paper's tables as DataFrames: ablation deltas (Tables 2 and 6) and top heads (Table 10).

Every function is pure: DataFrames in, a DataFrame out; writing files is the job of
``scripts/``. Scores arrive in display units (accuracy in percent, or percent of the unablated
baseline for "relative" tasks), so every delta is in percentage points. Deltas keep full
precision here; rounding happens only in :mod:`headloc.report.formats`.

Delta Task and Delta Gen follow the paper (section 5, Table 2 caption). For one run
(``model, task, search``) after ablating its top ``k`` heads::

    delta_task = score(eval_task == task, k) - score(eval_task == task, 0)
    delta_gen  = mean over eval_task != task of (score(eval_task, k) - score(eval_task, 0))

The baseline ``score(eval_task, 0)`` is shared by every run of a model: it is the mean of that
model's ``k == 0`` rows for the eval task (they are copies of one unablated evaluation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from headloc.heads import HEAD_PATTERN

EVAL_COLUMNS = ("model", "task", "method", "search", "k", "eval_task", "score")
RECOVERY_COLUMNS = ("model", "task", "method", "search", "top_heads", "n_evals")
RUN_KEYS = ["model", "task", "method", "search"]
BASELINE = "BL"


def check_columns(df: pd.DataFrame, required: Iterable[str], name: str) -> None:
    """Raise ValueError naming every column of ``required`` that ``df`` lacks.

    Parameters
    ----------
    df : DataFrame
        The frame to check.
    required : iterable of str
        Column names that must be present.
    name : str
        What ``df`` is called in the message (``"evals"``, ``"recoveries"``).

    Examples
    --------
    >>> check_columns(pd.DataFrame({"model": []}), ["model", "score"], "evals")
    Traceback (most recent call last):
    ...
    ValueError: evals is missing required column(s): score
    """
    missing = [column for column in required if column not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing required column(s): {', '.join(missing)}")


def _sort_first_seen(
    df: pd.DataFrame, keys: Sequence[str], then: Sequence[str] = ()
) -> pd.DataFrame:
    """Stable sort by each of ``keys`` in order of first appearance, then by ``then`` values."""
    df = df.reset_index(drop=True)
    order = pd.DataFrame(
        {f"_{key}": df[key].map({v: i for i, v in enumerate(pd.unique(df[key]))}) for key in keys}
    )
    for column in then:
        order[f"_{column}"] = df[column]
    index = order.sort_values(list(order.columns), kind="stable").index
    return df.loc[index].reset_index(drop=True)


def _check_baselines(rows: pd.DataFrame, baseline: pd.Series) -> None:
    """Raise ValueError naming each (model, eval_task) that has no k = 0 row."""
    pairs = rows[["model", "eval_task"]].drop_duplicates()
    known = pd.MultiIndex.from_frame(pairs).isin(baseline.index)
    if not known.all():
        lacking = pairs[~known].itertuples(index=False)
        names = ", ".join(f"model {m!r} eval_task {t!r}" for m, t in lacking)
        raise ValueError(f"no baseline (k = 0) rows for {names}; every delta needs one")


def deltas(evals: pd.DataFrame, *, gen_tasks: Iterable[str] | None = None) -> pd.DataFrame:
    """Score, Delta Task and Delta Gen for every run and number of ablated heads.

    Parameters
    ----------
    evals : DataFrame
        One row per full-dataset evaluation, with columns ``model, task, method, search, k,
        eval_task, score`` (others, such as ``headset``, are ignored).
    gen_tasks : iterable of str, optional
        The eval tasks that make up "general ability" (the paper uses HellaSwag, BoolQ, ARC
        Challenge and MMLU). Default: every eval task of the run other than its own task.

    Returns
    -------
    DataFrame
        Columns ``model, task, method, search, k, score, delta_task, delta_gen``; one row per
        (model, task, search, k), sorted by task, then model (both in order of first
        appearance), then search, then k. ``score`` is the score on the run's own task;
        ``delta_gen`` is NaN when the run has no other eval task.

    Raises
    ------
    ValueError
        If a required column is missing, or a (model, eval_task) has no ``k == 0`` row.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> deltas(evals)[["k", "score", "delta_task", "delta_gen"]]
       k  score  delta_task  delta_gen
    0  0   80.0         0.0        0.0
    1  1   50.0       -30.0       -1.0
    """
    check_columns(evals, EVAL_COLUMNS, "evals")
    rows = evals.loc[:, list(EVAL_COLUMNS)].copy()
    rows["own"] = rows["eval_task"] == rows["task"]
    if gen_tasks is not None:
        rows = rows[rows["own"] | rows["eval_task"].isin(list(gen_tasks))]
    baseline = rows[rows["k"] == 0].groupby(["model", "eval_task"])["score"].mean()
    _check_baselines(rows, baseline)
    base = rows.join(baseline.rename("base"), on=["model", "eval_task"])["base"]
    rows["delta"] = rows["score"] - base

    keys = RUN_KEYS + ["k"]
    own = rows[rows["own"]].groupby(keys)[["score", "delta"]].mean()
    gen = rows[~rows["own"]].groupby(keys)["delta"].mean().rename("delta_gen")
    out = rows[keys].drop_duplicates().join(own, on=keys).join(gen, on=keys)
    out = out.rename(columns={"delta": "delta_task"})
    out = _sort_first_seen(out, ["task", "model", "search"], then=["k"])
    return out[keys + ["score", "delta_task", "delta_gen"]]


def table2(
    evals: pd.DataFrame, k: int = 5, *, gen_tasks: Iterable[str] | None = None
) -> pd.DataFrame:
    """Paper Table 2: Delta Task and Delta Gen after ablating each run's top ``k`` heads.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`deltas`).
    k : int, default 5
        Number of top heads ablated. A run with fewer heads evaluated uses its largest k.
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen (see :func:`deltas`).

    Returns
    -------
    DataFrame
        Columns ``model, task, method, search, k, delta_task, delta_gen``; one row per
        (model, task, search); ``k`` is the number of heads actually ablated. Rows are grouped
        by task, then model, in order of first appearance.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> table2(evals, k=5)[["k", "delta_task", "delta_gen"]]
       k  delta_task  delta_gen
    0  1       -30.0       -1.0
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    d = deltas(evals, gen_tasks=gen_tasks)
    largest = d.groupby(["model", "task", "search"])["k"].transform("max")
    d = d[d["k"] == np.minimum(largest, k)]
    return d[RUN_KEYS + ["k", "delta_task", "delta_gen"]].reset_index(drop=True)


def table6(evals: pd.DataFrame, *, gen_tasks: Iterable[str] | None = None) -> pd.DataFrame:
    """Paper Table 6: task score and deltas for every number of ablated heads.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`deltas`).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen (see :func:`deltas`).

    Returns
    -------
    DataFrame
        Columns ``model, task, method, search, n_heads, score, delta_task, delta_gen``; one row
        per (model, task, search, k). ``n_heads`` is ``"BL"`` for the unablated baseline
        (k = 0), whose deltas are NaN, and the integer k otherwise.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> table6(evals)[["n_heads", "score", "delta_task", "delta_gen"]]
      n_heads  score  delta_task  delta_gen
    0      BL   80.0         NaN        NaN
    1       1   50.0       -30.0       -1.0
    """
    d = deltas(evals, gen_tasks=gen_tasks)
    is_baseline = d["k"] == 0
    d[["delta_task", "delta_gen"]] = d[["delta_task", "delta_gen"]].mask(is_baseline)
    n_heads = [BASELINE if k == 0 else int(k) for k in d["k"]]
    d["n_heads"] = pd.Series(n_heads, index=d.index, dtype=object)
    return d[RUN_KEYS + ["n_heads", "score", "delta_task", "delta_gen"]]


def _head_list(value) -> list[str]:
    """Top heads as a list, from a list/array or from a string such as "L1H2, L3H4"."""
    if isinstance(value, str):
        return [match.group(0) for match in HEAD_PATTERN.finditer(value)]
    return [str(head) for head in value]


def table10(recoveries: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Paper Tables 9 and 10: the top ``k`` heads recovered by each search.

    Parameters
    ----------
    recoveries : DataFrame
        One row per search, with columns ``model, task, method, search, top_heads, n_evals``;
        ``top_heads`` holds head names best first (a list, or a string of names).
    k : int, default 5
        How many heads to list (fewer if the search recovered fewer).

    Returns
    -------
    DataFrame
        Columns ``model, task, method, search, heads, n_evals``, where ``heads`` is the
        comma-joined top-k list (``"L15H13, L16H21"``). Rows are grouped by model, then task,
        in order of first appearance, as in Table 10.

    Examples
    --------
    >>> recoveries = pd.DataFrame({
    ...     "model": ["m"], "task": ["gsm8k"], "method": ["cs_stratified"], "search": ["s0"],
    ...     "top_heads": [["L15H13", "L16H21", "L12H12"]], "n_evals": [100]})
    >>> table10(recoveries, k=2)["heads"].tolist()
    ['L15H13, L16H21']
    """
    check_columns(recoveries, RECOVERY_COLUMNS, "recoveries")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    out = recoveries.loc[:, RUN_KEYS].copy()
    out["heads"] = [", ".join(_head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    return _sort_first_seen(out, ["model", "task"])
