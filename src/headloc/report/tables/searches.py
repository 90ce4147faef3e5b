"""Tables 4, 9 and 10: every search method side by side (Delta Task, Delta Gen, greedy's recall), and the
top heads each search identified."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from headloc import methods
from headloc.report.delta import deltas
from headloc.report.frames import (
    NO_SEARCHES, NO_TASK_RUNS, RECOVERIES_NEED, RUN_KEYS, check_columns, check_k, empty_table, is_blank,
    only_method, sort_first_seen
)
from headloc.report.spec import TableSpec
from headloc.report.tables.registry import add, at_k, head_list


TABLE4_COLUMNS = ("capability", "model", "task", "method", "search", "n_evals", "k", "delta_task",
                  "delta_gen", "recall", "delta_task_unfiltered", "delta_gen_unfiltered")


def greedy_recall(recoveries: pd.DataFrame, k: int) -> pd.Series:
    """Each search's share of greedy's top ``k`` (the reference method, :data:`headloc.methods.REFERENCE`;
    same model and task) among its own top ``k``
    (``top_heads``, universal heads filtered when the run filters them); NaN without a greedy search.

    Examples
    --------
    >>> recoveries = pd.DataFrame({"model": "m", "task": "t", "method": ["greedy", "cs"],
    ...                            "search": ["g", "c"], "top_heads": ["L1H1,L2H2", "L2H2,L3H3"]})
    >>> greedy_recall(recoveries, 2).tolist()
    [1.0, 0.5]
    """
    check_columns(recoveries, ["model", "task", "method", "search", "top_heads"], "recoveries")
    greedy = {(r.model, r.task): set(head_list(r.top_heads)[:k])
              for r in recoveries.itertuples(index=False) if r.method == methods.REFERENCE}
    recall = []
    for r in recoveries.itertuples(index=False):
        reference = greedy.get((r.model, r.task))
        mine = set(head_list(r.top_heads)[:k])
        recall.append(len(mine & reference) / len(reference) if reference else np.nan)
    return pd.Series(recall, index=pd.MultiIndex.from_frame(recoveries[list(RUN_KEYS)]), name="recall")


def table4(
    evals: pd.DataFrame,
    recoveries: pd.DataFrame,
    k: int = 5,
    *,
    gen_tasks: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Paper Table 4: every method's Delta Task, Delta Gen and number of evaluations, with the
    recall of greedy's top k and the deltas of the unfiltered top k.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`deltas`); every method is used. Rows of
        ``kind == "unfiltered"`` (each search's own top k, universal heads kept) give the
        unfiltered columns; without them (the universal filter off) those equal the filtered ones.
    recoveries : DataFrame
        ``recoveries.tsv`` (columns ``model, task, method, search, top_heads, n_evals``);
        gives ``n_evals`` and the top heads behind ``recall``.
    k : int, default 5
        Number of top heads ablated (a run with fewer uses its largest k).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen.

    Returns
    -------
    DataFrame
        Columns ``capability, model, task, method, search, n_evals, k, delta_task, delta_gen,
        recall, delta_task_unfiltered, delta_gen_unfiltered``, grouped by capability, model, task,
        then method in order of first appearance. ``recall`` is the share of greedy's top k that
        the search's top k holds (NaN without a greedy search on the task); ``n_evals`` is NaN for
        a run without a recovery row. Empty with a note when ``evals`` has no task rows.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "method": "cs", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> recoveries = pd.DataFrame({"model": ["m"], "task": ["gsm8k"], "method": ["cs"],
    ...                            "search": ["s0"], "top_heads": ["L1H2"], "n_evals": [100]})
    >>> table4(evals, recoveries)[["method", "delta_task", "delta_gen", "n_evals", "delta_task_unfiltered"]]
      method  delta_task  delta_gen  n_evals  delta_task_unfiltered
    0     cs       -30.0       -1.0      100                  -30.0
    """
    check_k(k)
    check_columns(recoveries, ["model", "task", "method", "search", "top_heads", "n_evals"], "recoveries")
    d = deltas(evals, gen_tasks=gen_tasks)
    if d.empty:
        return empty_table(TABLE4_COLUMNS, NO_TASK_RUNS)
    out = at_k(d, k)
    keys = list(RUN_KEYS)
    n_evals = recoveries.drop_duplicates(keys).set_index(keys)["n_evals"]
    out = out.join(n_evals, on=keys).join(greedy_recall(recoveries.drop_duplicates(keys), k), on=keys)
    raw = deltas(evals, gen_tasks=gen_tasks, kind="unfiltered")
    if raw.empty:  # the universal filter is off: a search's own top k are its task heads
        raw = d
    raw = at_k(raw, k).set_index(keys)[["delta_task", "delta_gen"]].add_suffix("_unfiltered")
    out = out.join(raw, on=keys)
    out = sort_first_seen(out, ["capability", "model", "task", "method"])
    return out[list(TABLE4_COLUMNS)]


add(TableSpec(
    name="table4",
    about="Search methods compared: Delta Task, Delta Gen, evaluations used, recall of greedy's top k.",
    inputs=("evals_methods", "recoveries"),
    columns=TABLE4_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 4. Every search method: Delta Task, Delta Gen (top {k} heads ablated, "
            "{unit}), the number of evaluations it needed, the share of greedy's top {k} "
            "it found (recall), and the deltas of its own top {k} with universal heads kept (unfiltered)",
    builder=lambda evals, recoveries, options: table4(
        evals, recoveries, k=options.top_k, gen_tasks=options.gen_tasks),
    deltas=True,
))


TABLE9_COLUMNS = ("model", "capability", "task", "method", "search", "heads", "n_evals")


def table9(recoveries: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Paper Table 9: the top ``k`` heads of every method, per model and task.

    Parameters
    ----------
    recoveries : DataFrame
        One row per search (``results/tables/recoveries.tsv``), columns ``model, task, method,
        search, top_heads, n_evals`` (``capability`` optional); ``top_heads`` holds head names
        best first (a list, or a comma-joined string).
    k : int, default 5
        How many heads to list (fewer if the search recovered fewer).

    Returns
    -------
    DataFrame
        Columns ``model, capability, task, method, search, heads, n_evals``, grouped by model,
        capability, task, then method in order of first appearance. Empty with a note when
        there are no searches.

    Examples
    --------
    >>> recoveries = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": ["greedy", "cs_stratified"],
    ...     "search": ["g", "s0"], "top_heads": ["L16H21,L15H13", "L15H13,L16H2"],
    ...     "n_evals": [5120, 100]})
    >>> table9(recoveries, k=1)[["method", "heads"]]
              method   heads
    0         greedy  L16H21
    1  cs_stratified  L15H13
    """
    check_columns(recoveries, RECOVERIES_NEED, "recoveries")
    check_k(k)
    if recoveries.empty:
        return empty_table(TABLE9_COLUMNS, NO_SEARCHES)
    out = recoveries.loc[:, list(RUN_KEYS)].copy()
    if "capability" in recoveries.columns:
        caps = [task if is_blank(cap) else cap
                for task, cap in zip(out["task"], recoveries["capability"])]
    else:
        caps = list(out["task"])
    out["capability"] = caps
    out["heads"] = [", ".join(head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    out = sort_first_seen(out, ["model", "capability", "task", "method"])
    return out[list(TABLE9_COLUMNS)]


add(TableSpec(
    name="table9",
    about="Heads found by every method on every task.",
    inputs=("recoveries",),
    columns=TABLE9_COLUMNS,
    empty_note=NO_SEARCHES,
    caption="Table 9. Top {k} heads identified by every method, per model and task",
    builder=lambda recoveries, options: table9(recoveries, k=options.top_k),
))


TABLE10_COLUMNS = (*RUN_KEYS, "heads", "n_evals")


def table10(recoveries: pd.DataFrame, k: int = 5, *, method: str | None = None) -> pd.DataFrame:
    """Paper Table 10: the top ``k`` heads of the main method across models and tasks.

    Parameters
    ----------
    recoveries : DataFrame
        One row per search (see :func:`table9`).
    k : int, default 5
        How many heads to list (fewer if the search recovered fewer).
    method : str, optional
        The main method (the paper uses stratified compressed sensing); default: every method.

    Returns
    -------
    DataFrame
        Columns ``model, task, method, search, heads, n_evals``, where ``heads`` is the
        comma-joined top-k list (``"L15H13, L16H21"``). Rows are grouped by model, then task,
        in order of first appearance, as in Table 10. Empty with a note when there are no
        searches.

    Raises
    ------
    ValueError
        If ``method`` has no searches while other methods do.

    Examples
    --------
    >>> recoveries = pd.DataFrame({
    ...     "model": ["m"], "task": ["gsm8k"], "method": ["cs_stratified"], "search": ["s0"],
    ...     "top_heads": [["L15H13", "L16H21", "L12H12"]], "n_evals": [100]})
    >>> table10(recoveries, k=2)["heads"].tolist()
    ['L15H13, L16H21']
    """
    check_columns(recoveries, RECOVERIES_NEED, "recoveries")
    check_k(k)
    if recoveries.empty:
        return empty_table(TABLE10_COLUMNS, NO_SEARCHES)
    recoveries = only_method(recoveries, method, name="table10", source="recoveries")
    out = recoveries.loc[:, list(RUN_KEYS)].copy()
    out["heads"] = [", ".join(head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    return sort_first_seen(out, ["model", "task"])[list(TABLE10_COLUMNS)]


add(TableSpec(
    name="table10",
    about="Heads found by the main method, per model and task.",
    inputs=("recoveries_main",),
    columns=TABLE10_COLUMNS,
    empty_note=NO_SEARCHES,
    caption="Table 10. Top {k} heads per model and task ({main}, most damaging first)",
    builder=lambda recoveries, options: table10(recoveries, k=options.top_k,
                                                method=options.method),
))
