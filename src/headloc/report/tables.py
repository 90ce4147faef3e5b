"""The paper's tables as DataFrames (Tables 1-10 and the appendix A.1 tuning grid), each with
its :class:`~headloc.report.spec.TableSpec` next to it, collected in :data:`TABLES`.

Every function is pure: DataFrames in, a DataFrame out; writing files is the job of
``scripts/render_table.py``. The input frames and the definition of Delta Task and Delta Gen
are described in :mod:`headloc.report.frames`, whose helpers the figures share. Deltas keep
full precision here; rounding happens only in :mod:`headloc.report.formats`.

Empty results. The workflow renders every table even on small runs, so a table whose input is
legitimately empty (no universal heads found, no knowledge tasks configured, no tuning grid)
is returned as an empty frame with the table's columns and an explanatory
``df.attrs["note"]`` (the spec's ``empty_note``), which :func:`~headloc.report.to_markdown`
and :func:`~headloc.report.to_latex` print under the header. Malformed input (missing columns,
missing baselines, a method, model or task that the data does not have) raises ValueError.

Unconfirmed heads. A search that confirms heads by ablating each alone (group testing) may stop
before it confirms its whole top k; the tables that list or validate top heads (2, 3, 4, 9, 10)
read the recoveries too and show such heads (:func:`mark_unconfirmed`): marked in a ``heads``
column, else listed in the note under the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from headloc import methods
from headloc.heads import HEAD_PATTERN
from headloc.report.frames import (
    MODELS_NEED,
    NO_KNOWLEDGE_HEADS,
    NO_MODELS,
    NO_SEARCHES,
    NO_TASK_RUNS,
    NO_TUNING,
    NO_UNIVERSAL_HEADS,
    RECOVERIES_NEED,
    RUN_KEYS,
    TUNING_NEED,
    baselines,
    capabilities_of,
    capability_map,
    check_columns,
    check_k,
    check_knowledge_eval_tasks,
    deltas,
    empty_table,
    is_blank,
    kind_rows,
    only_method,
    shared_heads,
    sort_first_seen,
    task_runs,
    with_delta,
)
from headloc.report.labels import search_labels
from headloc.report.spec import TableSpec

BASELINE = "BL"
KNOWLEDGE_AVG = "knowledge_mc_avg"
OTHER_AVG = "other_avg"

TABLES: dict[str, TableSpec] = {}
"""Every paper table by name, in paper order (appendix last); each added next to its builder."""


def _add(spec: TableSpec) -> None:
    if spec.name in TABLES:
        raise ValueError(f"table {spec.name!r} is described twice")
    TABLES[spec.name] = spec


def _at_k(d: pd.DataFrame, k: int) -> pd.DataFrame:
    """Each run's row at ``min(k, largest k evaluated)``."""
    largest = d.groupby(["model", "task", "search"])["k"].transform("max")
    return d[d["k"] == np.minimum(largest, k)].reset_index(drop=True)


TABLE1_COLUMNS = ("model", "layers", "heads", "total")


def table1(models: pd.DataFrame) -> pd.DataFrame:
    """Paper Table 1: layers, heads per layer and total heads of each model.

    Parameters
    ----------
    models : DataFrame
        ``results/tables/models.tsv``: columns ``model, n_layers, n_heads, total`` (others,
        such as ``source`` and ``n_kv_heads``, are ignored).

    Returns
    -------
    DataFrame
        Columns ``model, layers, heads, total`` in the input's order; empty with a note when
        no model is configured.

    Raises
    ------
    ValueError
        If a column is missing or ``total != layers * heads``.

    Examples
    --------
    >>> table1(pd.DataFrame({"model": ["smollm2"], "source": ["x"], "n_layers": [30],
    ...                      "n_heads": [9], "n_kv_heads": [3], "total": [270]}))
         model  layers  heads  total
    0  smollm2      30      9    270
    """
    check_columns(models, MODELS_NEED, "models")
    if models.empty:
        return empty_table(TABLE1_COLUMNS, NO_MODELS)
    out = models.rename(columns={"n_layers": "layers", "n_heads": "heads"})[list(TABLE1_COLUMNS)]
    bad = out[out["layers"] * out["heads"] != out["total"]]
    if len(bad):
        row = bad.iloc[0]
        raise ValueError(
            f"models: total {row['total']} of model {row['model']!r} is not layers x heads = "
            f"{row['layers']} x {row['heads']}"
        )
    return out.reset_index(drop=True)


_add(TableSpec(
    name="table1",
    about="Layers, heads per layer and total heads of every model.",
    inputs=("models",),
    columns=TABLE1_COLUMNS,
    empty_note=NO_MODELS,
    caption="Table 1. Layers L, heads per layer H and total heads N of each model",
    builder=lambda models, options: table1(models),
))


TABLE2_COLUMNS = ("capability", "model", "task", "search", "k", "delta_task", "delta_gen")


def table2(
    evals: pd.DataFrame,
    k: int = 5,
    *,
    gen_tasks: Iterable[str] | None = None,
    method: str | None = None,
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
    method : str, optional
        The main method (the paper's Table 2 uses stratified compressed sensing only);
        default: every method.

    Returns
    -------
    DataFrame
        Columns ``capability, model, task, search, k, delta_task, delta_gen``; one row per
        (model, task, search), grouped like the paper by capability, then model, then task
        (each in order of first appearance); ``k`` is the number of heads actually ablated.
        Empty with a note when ``evals`` has no task rows.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> table2(evals, k=5)[["k", "delta_task", "delta_gen"]]
       k  delta_task  delta_gen
    0  1       -30.0       -1.0
    """
    check_k(k)
    d = deltas(evals, gen_tasks=gen_tasks, method=method)
    if d.empty:
        return empty_table(TABLE2_COLUMNS, NO_TASK_RUNS)
    return _at_k(d, k)[list(TABLE2_COLUMNS)]


_add(TableSpec(
    name="table2",
    about="Delta Task and Delta Gen of the top-k task-specific heads.",
    inputs=("evals_main",),
    columns=TABLE2_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 2. Change in task score (Delta Task) and in the mean of {gen} (Delta Gen), "
            "percentage points, top {k} heads ({main}) ablated",
    builder=lambda evals, options: table2(evals, k=options.top_k, gen_tasks=options.gen_tasks,
                                          method=options.method),
    deltas=True,
))


TABLE3_COLUMNS = ("capability", "model", "id_on", "eval_on", "search", "k", "delta_task",
                  "delta_gen")


def table3(
    evals: pd.DataFrame,
    k: int = 5,
    *,
    gen_tasks: Iterable[str] | None = None,
    method: str | None = None,
) -> pd.DataFrame:
    """Paper Table 3: heads identified on one dataset, evaluated on every dataset of its capability.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`deltas`); ``capability``/``eval_capability`` group
        the tasks (without them every task is its own capability, so only A = B rows remain).
    k : int, default 5
        Number of top heads ablated (a run with fewer uses its largest k).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen (see :func:`deltas`).
    method : str, optional
        The main method; default: every method.

    Returns
    -------
    DataFrame
        Columns ``capability, model, id_on, eval_on, search, k, delta_task, delta_gen``: for
        each run (heads identified on task A) one row per eval task B of A's capability, A
        itself first. ``delta_task`` is the change on B; ``delta_gen`` is the run's Delta Gen
        (as in Table 2). Empty with a note when ``evals`` has no task rows.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "capability": "math", "method": "cs",
    ...     "search": "s0", "k": [0, 0, 0, 1, 1, 1], "eval_task": ["gsm8k", "arithmetic", "boolq"] * 2,
    ...     "eval_capability": ["math", "math", "general"] * 2,
    ...     "score": [80.0, 90.0, 70.0, 50.0, 60.0, 69.0]})
    >>> table3(evals)[["id_on", "eval_on", "delta_task", "delta_gen"]]
       id_on     eval_on  delta_task  delta_gen
    0  gsm8k       gsm8k       -30.0      -15.5
    1  gsm8k  arithmetic       -30.0      -15.5
    """
    check_k(k)
    d = deltas(evals, gen_tasks=gen_tasks, method=method)
    if d.empty:
        return empty_table(TABLE3_COLUMNS, NO_TASK_RUNS)
    chosen = _at_k(d, k)
    rows = task_runs(evals, method, "table3")
    mapping = capability_map(evals)
    rows = with_delta(rows, baselines(rows))
    rows["eval_cap"] = capabilities_of(rows["eval_task"], mapping)
    out = []
    for run in chosen.itertuples(index=False):
        mine = rows[(rows["model"] == run.model) & (rows["task"] == run.task)
                    & (rows["search"] == run.search) & (rows["k"] == run.k)
                    & (rows["eval_cap"] == run.capability)]
        per_task = mine.groupby("eval_task", sort=False)["delta"].mean()
        order = [run.task] + [t for t in per_task.index if t != run.task]
        for eval_on in order:
            out.append({"capability": run.capability, "model": run.model, "id_on": run.task,
                        "eval_on": eval_on, "search": run.search, "k": run.k,
                        "delta_task": per_task.get(eval_on, np.nan),
                        "delta_gen": run.delta_gen})
    return pd.DataFrame(out, columns=list(TABLE3_COLUMNS))


_add(TableSpec(
    name="table3",
    about="Heads found on one dataset, evaluated on the others of its capability.",
    inputs=("evals_main",),
    columns=TABLE3_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 3. Heads identified on one task (id on), top {k} ({main}) ablated, "
            "evaluated on every task of the same capability (eval on); percentage points",
    builder=lambda evals, options: table3(evals, k=options.top_k, gen_tasks=options.gen_tasks,
                                          method=options.method),
    deltas=True,
))


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
    greedy = {(r.model, r.task): set(_head_list(r.top_heads)[:k])
              for r in recoveries.itertuples(index=False) if r.method == methods.REFERENCE}
    recall = []
    for r in recoveries.itertuples(index=False):
        reference = greedy.get((r.model, r.task))
        mine = set(_head_list(r.top_heads)[:k])
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
    out = _at_k(d, k)
    keys = list(RUN_KEYS)
    n_evals = recoveries.drop_duplicates(keys).set_index(keys)["n_evals"]
    out = out.join(n_evals, on=keys).join(greedy_recall(recoveries.drop_duplicates(keys), k), on=keys)
    raw = deltas(evals, gen_tasks=gen_tasks, kind="unfiltered")
    if raw.empty:  # the universal filter is off: a search's own top k are its task heads
        raw = d
    raw = _at_k(raw, k).set_index(keys)[["delta_task", "delta_gen"]].add_suffix("_unfiltered")
    out = out.join(raw, on=keys)
    out = sort_first_seen(out, ["capability", "model", "task", "method"])
    return out[list(TABLE4_COLUMNS)]


_add(TableSpec(
    name="table4",
    about="Search methods compared: Delta Task, Delta Gen, evaluations used, recall of greedy's top k.",
    inputs=("evals_methods", "recoveries"),
    columns=TABLE4_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 4. Every search method: Delta Task, Delta Gen (top {k} heads ablated, "
            "percentage points), the number of evaluations it needed, the share of greedy's top {k} "
            "it found (recall), and the deltas of its own top {k} with universal heads kept (unfiltered)",
    builder=lambda evals, recoveries, options: table4(
        evals, recoveries, k=options.top_k, gen_tasks=options.gen_tasks),
    deltas=True,
))


def _mean(values) -> float:
    values = [v for v in values if not pd.isna(v)]
    return float(np.mean(values)) if values else np.nan


TABLE5_COLUMNS = ("model", "head", "delta_{capability}", "delta_gen")


def table5(
    evals: pd.DataFrame,
    *,
    gen_tasks: Iterable[str] | None = None,
    capabilities: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Paper Table 5: mean change per capability when one universal head is ablated.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame; ``kind == "universal"`` rows with ``k == 1`` (one head per
        ``headset``) against the model's ``k == 0`` baseline.
    gen_tasks : iterable of str, optional
        Eval tasks averaged into ``delta_gen``. Default: every eval task (universal heads have
        no task of their own).
    capabilities : mapping of str to str, optional
        Task -> capability in config order; sets the column order and overrides the frame's
        ``eval_capability``. A task missing from both is its own capability.

    Returns
    -------
    DataFrame
        Columns ``model, head``, then ``delta_<capability>`` for each capability present
        (config order, then first appearance) except those whose eval tasks all lie in
        ``gen_tasks`` (they are Delta Gen), then ``delta_gen``. One row per (model, head),
        heads sorted by (layer, head). Empty with a note when there are no universal heads.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "kind": "universal", "k": [0, 0, 0, 1, 1, 1],
    ...     "headset": ["none"] * 3 + ["L0H3"] * 3, "eval_task": ["gsm8k", "mbpp", "boolq"] * 2,
    ...     "score": [80.0, 50.0, 70.0, 40.0, 45.0, 60.0]})
    >>> table5(evals, gen_tasks=["boolq"], capabilities={"gsm8k": "math", "mbpp": "code",
    ...                                                  "boolq": "general"})
      model  head  delta_math  delta_code  delta_gen
    0     m  L0H3       -40.0        -5.0      -10.0
    """
    rows, pairs = shared_heads(evals, "universal")
    mapping = capability_map(evals, capabilities)
    gen = None if gen_tasks is None else set(gen_tasks)
    # the columns of an empty table come from the configured capabilities
    eval_tasks = list(pd.unique(rows["eval_task"])) if len(rows) else list(capabilities or {})
    caps: list[str] = []
    for cap in [*(capabilities or {}).values(), *capabilities_of(eval_tasks, mapping)]:
        members = [t for t in eval_tasks if mapping.get(t, t) == cap]
        if cap not in caps and members and not (gen is not None and set(members) <= gen):
            caps.append(cap)
    columns = ["model", "head", *(f"delta_{cap}" for cap in caps), "delta_gen"]
    if not pairs:
        return empty_table(columns, NO_UNIVERSAL_HEADS)
    out = []
    for model, head in pairs:
        mine = rows[(rows["model"] == model) & (rows["headset"] == head)]
        per_task = mine.groupby("eval_task")["delta"].mean()
        row = {"model": model, "head": head}
        for cap in caps:
            members = [mapping.get(task, task) == cap for task in per_task.index]
            row[f"delta_{cap}"] = _mean(per_task[members])
        in_gen = per_task if gen is None else per_task[per_task.index.isin(gen)]
        row["delta_gen"] = _mean(in_gen)
        out.append(row)
    return pd.DataFrame(out, columns=columns)


_add(TableSpec(
    name="table5",
    about="Universal heads: mean Delta per capability.",
    inputs=("evals_universal",),
    columns=TABLE5_COLUMNS,
    empty_note=NO_UNIVERSAL_HEADS,
    caption="Table 5. Universal heads: mean change per capability when one head is ablated "
            "(percentage points)",
    builder=lambda evals, options: table5(evals, gen_tasks=options.gen_tasks,
                                          capabilities=options.capabilities),
    deltas=True,
))


TABLE6_COLUMNS = ("capability", "model", "task", "search", "n_heads", "score", "delta_task",
                  "delta_gen")


def table6(
    evals: pd.DataFrame,
    *,
    gen_tasks: Iterable[str] | None = None,
    method: str | None = None,
) -> pd.DataFrame:
    """Paper Table 6: task score and deltas for every number of ablated heads.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`deltas`).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen (see :func:`deltas`).
    method : str, optional
        The main method; default: every method.

    Returns
    -------
    DataFrame
        Columns ``capability, model, task, search, n_heads, score, delta_task, delta_gen``;
        one row per (model, task, search, k). ``n_heads`` is ``"BL"`` for the unablated
        baseline (k = 0), whose deltas are NaN, and the integer k otherwise. Empty with a note
        when ``evals`` has no task rows.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> table6(evals)[["n_heads", "score", "delta_task", "delta_gen"]]
      n_heads  score  delta_task  delta_gen
    0      BL   80.0         NaN        NaN
    1       1   50.0       -30.0       -1.0
    """
    d = deltas(evals, gen_tasks=gen_tasks, method=method)
    if d.empty:
        return empty_table(TABLE6_COLUMNS, NO_TASK_RUNS)
    is_baseline = d["k"] == 0
    d[["delta_task", "delta_gen"]] = d[["delta_task", "delta_gen"]].mask(is_baseline)
    n_heads = [BASELINE if k == 0 else int(k) for k in d["k"]]
    d["n_heads"] = pd.Series(n_heads, index=d.index, dtype=object)
    return d[list(TABLE6_COLUMNS)]


_add(TableSpec(
    name="table6",
    about="Degradation against the number of heads ablated.",
    inputs=("evals_main",),
    columns=TABLE6_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 6. Score and degradation against the number of top heads ({main}) ablated "
            "(BL = unablated)",
    builder=lambda evals, options: table6(evals, gen_tasks=options.gen_tasks,
                                          method=options.method),
    deltas=True,
))


def _head_rows(
    rows: pd.DataFrame, pairs: list, evals: pd.DataFrame, groups: list[tuple[list[str], str]]
) -> pd.DataFrame:
    """Wide BL + per-head rows: each group of eval-task columns followed by its average column."""
    out = []
    base = baselines(evals)
    for model in dict.fromkeys(model for model, _ in pairs):
        mine = [(BASELINE, base.loc[model])]
        for _, head in [p for p in pairs if p[0] == model]:
            sel = rows[(rows["model"] == model) & (rows["headset"] == head)]
            mine.append((head, sel.groupby("eval_task")["delta"].mean()))
        for head, values in mine:
            row = {"model": model, "head": head}
            for tasks, avg in groups:
                for task in tasks:
                    row[task] = values.get(task, np.nan)
                row[avg] = _mean([row[task] for task in tasks])
            out.append(row)
    columns = ["model", "head"] + [c for tasks, avg in groups for c in [*tasks, avg]]
    return pd.DataFrame(out, columns=columns)


TABLE7_COLUMNS = ("model", "head", "{eval_task}", "avg")


def table7(evals: pd.DataFrame) -> pd.DataFrame:
    """Paper Table 7: the change on every eval task when one universal head is ablated.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame; ``kind == "universal"`` rows.

    Returns
    -------
    DataFrame
        Columns ``model, head``, one column per eval task (order of first appearance), then
        ``avg``. Per model a ``BL`` row holds the unablated scores (and their mean), then one
        row per universal head holds the deltas (and their mean). Empty with a note when
        there are no universal heads.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "kind": "universal", "k": [0, 0, 1, 1],
    ...     "headset": ["none", "none", "L1H2", "L1H2"], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 40.0, 65.0]})
    >>> table7(evals)
      model  head  gsm8k  boolq   avg
    0     m    BL   80.0   70.0  75.0
    1     m  L1H2  -40.0   -5.0 -22.5
    """
    rows, pairs = shared_heads(evals, "universal")
    if not pairs:
        return empty_table(["model", "head", "avg"],
                           NO_UNIVERSAL_HEADS)
    tasks = list(pd.unique(kind_rows(evals, "universal")["eval_task"]))
    return _head_rows(rows, pairs, evals, [(tasks, "avg")])


_add(TableSpec(
    name="table7",
    about="Universal heads: Delta on every task.",
    inputs=("evals_universal",),
    columns=TABLE7_COLUMNS,
    empty_note=NO_UNIVERSAL_HEADS,
    caption="Table 7. Universal heads: unablated scores (BL) and the change on every task when "
            "one head is ablated (percentage points)",
    builder=lambda evals, options: table7(evals),
    deltas=True,
))


TABLE8_COLUMNS = ("model", "head", "{knowledge_eval_task}", KNOWLEDGE_AVG, "{other_eval_task}",
                  OTHER_AVG)


def table8(evals: pd.DataFrame, knowledge_eval_tasks: Sequence[str] = ()) -> pd.DataFrame:
    """Paper Table 8: knowledge multiple-choice heads, knowledge-MC tasks grouped apart.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame; ``kind == "knowledge"`` rows (one head per ``headset``).
    knowledge_eval_tasks : sequence of str
        The "knowledge MC" eval tasks (MMLU and WMDP in the paper), in column order.

    Returns
    -------
    DataFrame
        Columns ``model, head``, the knowledge-MC eval tasks, ``knowledge_mc_avg``, the other
        eval tasks (order of first appearance), ``other_avg``. Per model with knowledge heads
        a ``BL`` row (unablated scores), then one row per knowledge head (deltas). Empty with
        a note when there are no knowledge heads.

    Raises
    ------
    ValueError
        If a knowledge eval task was not evaluated with the knowledge heads.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "higher_is_better": True, "kind": "knowledge", "k": [0, 0, 0, 1, 1, 1],
    ...     "headset": ["none"] * 3 + ["L0H22"] * 3,
    ...     "eval_task": ["mmlu", "wmdp_bio", "gsm8k"] * 2,
    ...     "score": [46.0, 56.0, 33.0, 25.0, 26.0, 34.0]})
    >>> table8(evals, ["mmlu", "wmdp_bio"]).iloc[:, 1:]
        head  mmlu  wmdp_bio  knowledge_mc_avg  gsm8k  other_avg
    0     BL  46.0      56.0              51.0   33.0       33.0
    1  L0H22 -21.0     -30.0             -25.5    1.0        1.0
    """
    rows, pairs = shared_heads(evals, "knowledge")
    knowledge = list(knowledge_eval_tasks)
    if not pairs:
        return empty_table(["model", "head", *knowledge, KNOWLEDGE_AVG, OTHER_AVG],
                           NO_KNOWLEDGE_HEADS)
    present = check_knowledge_eval_tasks(evals, knowledge, "table8")
    other = [task for task in present if task not in knowledge]
    return _head_rows(rows, pairs, evals, [(knowledge, KNOWLEDGE_AVG), (other, OTHER_AVG)])


_add(TableSpec(
    name="table8",
    about="Knowledge multiple-choice heads: Delta on every task.",
    inputs=("evals_knowledge",),
    columns=TABLE8_COLUMNS,
    empty_note=NO_KNOWLEDGE_HEADS,
    caption="Table 8. Knowledge multiple-choice heads: unablated scores (BL) and the change "
            "when one head is ablated, knowledge MC tasks grouped apart (percentage points)",
    builder=lambda evals, options: table8(evals, options.knowledge_eval_tasks),
    deltas=True,
))


def _head_list(value) -> list[str]:
    """Top heads as a list, from a list/array or from a string such as "L1H2, L3H4"."""
    if isinstance(value, str):
        return [match.group(0) for match in HEAD_PATTERN.finditer(value)]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(head) for head in value]


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
    out["heads"] = [", ".join(_head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    out = sort_first_seen(out, ["model", "capability", "task", "method"])
    return out[list(TABLE9_COLUMNS)]


_add(TableSpec(
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
    out["heads"] = [", ".join(_head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    return sort_first_seen(out, ["model", "task"])[list(TABLE10_COLUMNS)]


_add(TableSpec(
    name="table10",
    about="Heads found by the main method, per model and task.",
    inputs=("recoveries_main",),
    columns=TABLE10_COLUMNS,
    empty_note=NO_SEARCHES,
    caption="Table 10. Top {k} heads per model and task ({main}, most damaging first)",
    builder=lambda recoveries, options: table10(recoveries, k=options.top_k,
                                                method=options.method),
))


TUNING_TABLE_COLUMNS = ("model", "task", "method", "n_masks", "sparsity", "top_heads",
                        "baseline", "ablated", "degradation", "chosen")
CHOSEN_MARK = "yes"


def tuning_table(tuning: pd.DataFrame) -> pd.DataFrame:
    """Appendix A.1: the hyperparameter grid per model and task, the chosen setting marked.

    Parameters
    ----------
    tuning : DataFrame
        ``results/tables/tuning.tsv``: one row per (model, task, method, n_masks, sparsity)
        with the recovered ``top_heads``, the identification-subset score unablated
        (``baseline``) and with those heads ablated (``ablated``), ``degradation`` (ablated -
        baseline, pp) and ``chosen`` (bool, or "True"/"False" text).

    Returns
    -------
    DataFrame
        Columns ``model, task, method, n_masks, sparsity, top_heads, baseline, ablated,
        degradation, chosen``; grouped by model, task and method (first appearance), then
        sorted by n_masks and sparsity. ``top_heads`` is ``", "``-joined; ``chosen`` is
        ``"yes"`` on the chosen row and ``""`` elsewhere. Empty with a note when no tuning
        was configured.

    Examples
    --------
    >>> tuning = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": "cs", "n_masks": [200, 100],
    ...     "sparsity": 0.05, "search": ["a", "b"], "top_heads": ["L1H2,L3H4", "L1H2"],
    ...     "baseline": 80.0, "ablated": [40.0, 60.0], "degradation": [-40.0, -20.0],
    ...     "chosen": [True, False]})
    >>> t = tuning_table(tuning)
    >>> t[["n_masks", "top_heads", "degradation"]]
       n_masks   top_heads  degradation
    0      100        L1H2        -20.0
    1      200  L1H2, L3H4        -40.0
    >>> t["chosen"].tolist()
    ['', 'yes']
    """
    check_columns(tuning, TUNING_NEED, "tuning")
    if tuning.empty:
        return empty_table(TUNING_TABLE_COLUMNS, NO_TUNING)
    out = tuning.copy()
    out["top_heads"] = [", ".join(_head_list(heads)) for heads in out["top_heads"]]
    chosen = out["chosen"].map(lambda v: str(v).strip().lower() in ("true", "1", "yes"))
    out["chosen"] = np.where(chosen, CHOSEN_MARK, "")
    out = sort_first_seen(out, ["model", "task", "method"], then=["n_masks", "sparsity"])
    # a grid value, not a measurement: shown as written (0.25, not 0.2 after one-decimal rounding)
    out["sparsity"] = [f"{value:g}" for value in out["sparsity"]]
    return out[list(TUNING_TABLE_COLUMNS)]


_add(TableSpec(
    name="tuning",
    about="Hyperparameter search of appendix A.1.",
    inputs=("tuning",),
    columns=TUNING_TABLE_COLUMNS,
    empty_note=NO_TUNING,
    caption="Hyperparameter search (appendix A.1): degradation on the identification subset "
            "per number of masks and sparsity, in the scoring metric's unit (percentage points for a "
            "fraction); chosen = largest degradation in the metric's direction",
    builder=lambda tuning, options: tuning_table(tuning),
))


# ---------------------------------------------------------------- heads a search did not confirm

UNCONFIRMED_MARK = "?"
UNCONFIRMED_WHY = ("its search did not confirm (group testing: not ablated alone before its cap or its leads ran "
                   "out, known only by a group's drop; guided and screened greedy: not chosen, measured as a runner-up or not "
                   "at all), often because universal heads were filtered out of the heads it did confirm "
                   "(labels and warnings in recovery.json)")


def unconfirmed_heads(recoveries: pd.DataFrame) -> dict[tuple[str, str, str], list[str]]:
    """(model, task, search) -> the shown top heads its search did not confirm alone
    (``recoveries.tsv``'s ``unconfirmed``, universal heads already filtered as in ``top_heads``);
    only searches that have such heads."""
    if "unconfirmed" not in recoveries.columns:
        return {}
    found = {(r.model, r.task, r.search): _head_list(r.unconfirmed) for r in recoveries.itertuples(index=False)}
    return {key: heads for key, heads in found.items() if heads}


def mark_unconfirmed(table: pd.DataFrame, recoveries: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its runs' unconfirmed heads shown: each marked :data:`UNCONFIRMED_MARK` in a
    ``heads`` column, else listed per run in the note under the table. Unchanged when none."""
    missing = unconfirmed_heads(recoveries)
    task = "task" if "task" in table.columns else "id_on"  # Table 3: the task the heads were found on
    keys = [] if table.empty else list(zip(table["model"], table[task], table["search"]))
    runs = list(dict.fromkeys(key for key in keys if key in missing))
    if not runs:
        return table
    out = table.copy()
    if "heads" in out.columns:
        out["heads"] = [", ".join(head + UNCONFIRMED_MARK if head in missing.get(key, ()) else head
                                  for head in _head_list(heads)) for key, heads in zip(keys, out["heads"])]
        out.attrs["note"] = f"{UNCONFIRMED_MARK}: a head {UNCONFIRMED_WHY}"
    else:  # each search by its short label, as the table's rows show it (headloc.report.labels)
        label = dict(zip(table["search"], search_labels(table["search"])))
        listed = "; ".join(f"{model} {name} ({label[search]}): {', '.join(missing[(model, name, search)])}"
                           for model, name, search in runs)
        out.attrs["note"] = f"Unconfirmed top heads, {listed}. Each is a head {UNCONFIRMED_WHY}"
    return out


FOUND_WHY = ("found: how many of the run's top heads clear the noise on the identification documents (an effect "
             "below 0 by more than z times its spread when the documents are resampled, z corrected for the heads "
             "assessed: recovery.json's found, interval and no_head_found)")
EFFECTS_WHY = ("effects: each shown head's value, its 95 % interval when the documents are resampled and P, the share "
               "of resamples in which it stays in the top k (recovery.json's coef, interval and p_top_k)")


def _found_words(row, k: int) -> str:
    """A run's ``found`` cell: ``n/a`` (not assessed), ``none``, or how many of its top ``k`` heads."""
    found = row.found
    if found is None or (isinstance(found, str) and found.strip() == "-"):
        return "n/a"
    heads = _head_list(found)
    return f"{len(heads)} of {len(_head_list(row.top_heads)[:k])}" if heads else "none"


def mark_evidence(table: pd.DataFrame, recoveries: pd.DataFrame, k: int) -> pd.DataFrame:
    """``table`` with each run's evidence: a ``found`` column (:func:`_found_words`; a run with no head
    found above noise says ``none``, its reason in the note) and, where the table lists heads, their
    effects with 95 % intervals (``effects``). Unchanged for recoveries written without evidence."""
    if table.empty or "found" not in recoveries.columns:
        return table
    task = "task" if "task" in table.columns else "id_on"
    runs = {(r.model, r.task, r.search): r for r in recoveries.itertuples(index=False)}
    keys = list(zip(table["model"], table[task], table["search"]))
    words = {key: _found_words(run, k) for key, run in runs.items()}
    out = table.copy()
    out["found"] = [words.get(key, "n/a") for key in keys]
    if "heads" in out.columns:
        out["effects"] = [runs[key].effects if key in runs and isinstance(runs[key].effects, str) else ""
                          for key in keys]
        out.loc[out["found"] == "none", "heads"] = "none"
    reasons = []
    for key in dict.fromkeys(keys):
        if words.get(key) in ("none", "n/a"):
            reasons.append(f"{key[0]} {key[1]} ({key[2]}): {runs[key].no_head_found}")
    note = FOUND_WHY + (f". {EFFECTS_WHY}" if "heads" in out.columns else _effects_below(table, runs, keys)) + (
        ". No head found above noise, or not assessed: " + "; ".join(reasons) if reasons else "")
    before = table.attrs.get("note", "")
    out.attrs["note"] = " ".join(filter(None, [before + ("" if not before or before.endswith(".") else "."), note + "."]))
    return out


def _effects_below(table: pd.DataFrame, runs: Mapping, keys: list) -> str:
    """For a table that lists no heads (Table 2: each row ablates a run's top k), the note's sentences
    giving those heads with their evidence, one per run (its search by its short label)."""
    label = dict(zip(table["search"], search_labels(table["search"])))
    shown = [f"{key[0]} {key[1]} ({label[key[2]]}): {runs[key].effects}" for key in dict.fromkeys(keys)
             if key in runs and isinstance(runs[key].effects, str) and runs[key].effects]
    return "" if not shown else (". The heads ablated, each with its value, its 95 % interval when the documents are "
                                 "resampled and P(in the top k): " + ". ".join(shown))


def _marking(spec: TableSpec, source: str) -> TableSpec:
    """``spec`` reading ``source`` (a collected recoveries table) too, its table marked by
    :func:`mark_unconfirmed` and :func:`mark_evidence`."""
    inputs = spec.inputs if source in spec.inputs else (*spec.inputs, source)

    def builder(*frames_and_options):
        *frames, options = frames_and_options
        recoveries = frames[inputs.index(source)]
        marked = mark_unconfirmed(spec.builder(*frames[: len(spec.inputs)], options), recoveries)
        return mark_evidence(marked, recoveries, options.top_k) if spec.name in EVIDENCE_TABLES else marked

    return replace(spec, inputs=inputs, builder=builder)


EVIDENCE_TABLES = ("table2", "table3", "table10")  # each run's heads with their evidence (mark_evidence)
# the tables that list or validate a search's top heads
for _name, _source in (("table2", "recoveries_main"), ("table3", "recoveries_main"), ("table4", "recoveries"),
                       ("table9", "recoveries"), ("table10", "recoveries_main")):
    TABLES[_name] = _marking(TABLES[_name], _source)
