"""The paper's tables as DataFrames (Tables 1-10 and the appendix A.1 tuning grid).

Every function is pure: DataFrames in, a DataFrame out; writing files is the job of
``scripts/``. Scores arrive in display units (accuracy in percent, or percent of the unablated
baseline for "relative" tasks), so every delta is in percentage points. Deltas keep full
precision here; rounding happens only in :mod:`headloc.report.formats`.

The long evaluations frame (``results/tables/evals_<scope>.tsv``) has one row per full-dataset
evaluation: ``model, kind, task, capability, method, search, k, headset, eval_task,
eval_capability, score``. ``kind`` says where the head set came from: ``"task"`` (the top-k
heads of a search), ``"universal"`` and ``"knowledge"`` (one shared head, k = 1) or ``"extra"``
(user-given head sets, ignored here). A frame without a ``kind`` column is read as all
``"task"`` rows; without ``capability``/``eval_capability`` a task is its own capability.

Delta Task and Delta Gen follow the paper (section 5, Table 2 caption). For one run
(``model, task, search``) after ablating its top ``k`` heads::

    delta_task = score(eval_task == task, k) - score(eval_task == task, 0)
    delta_gen  = mean over eval_task != task of (score(eval_task, k) - score(eval_task, 0))

The baseline ``score(eval_task, 0)`` is shared by every run of a model: it is the mean of that
model's ``k == 0`` rows for the eval task (they are copies of one unablated evaluation).

Empty results. The workflow renders every table even on small runs, so a table whose input is
legitimately empty (no universal heads found, no knowledge tasks configured, no tuning grid)
is returned as an empty frame with the table's columns and an explanatory
``df.attrs["note"]``, which :func:`~headloc.report.to_markdown` and
:func:`~headloc.report.to_latex` print under the header. Malformed input (missing columns,
missing baselines, a method, model or task that the data does not have) raises ValueError.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from headloc.heads import HEAD_PATTERN, parse_head

EVAL_COLUMNS = ("model", "task", "method", "search", "k", "eval_task", "score")
SHARED_HEAD_COLUMNS = ("model", "k", "headset", "eval_task", "score")
RECOVERY_COLUMNS = ("model", "task", "method", "search", "top_heads", "n_evals")
MODEL_COLUMNS = ("model", "n_layers", "n_heads", "total")
TUNING_COLUMNS = (
    "model", "task", "method", "n_masks", "sparsity", "search", "top_heads", "baseline",
    "ablated", "degradation", "chosen",
)
RUN_KEYS = ["model", "task", "method", "search"]
BASELINE = "BL"
KNOWLEDGE_AVG = "knowledge_mc_avg"
OTHER_AVG = "other_avg"


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


def empty_table(columns: Sequence[str], note: str) -> pd.DataFrame:
    """An empty table with the given columns and ``attrs["note"]`` saying why it is empty.

    Examples
    --------
    >>> t = empty_table(["model", "head"], "no universal heads in evals (kind == 'universal')")
    >>> list(t.columns), len(t), t.attrs["note"]
    (['model', 'head'], 0, "no universal heads in evals (kind == 'universal')")
    """
    table = pd.DataFrame(columns=list(columns))
    table.attrs["note"] = note
    return table


def _check_k(k: int) -> None:
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def _blank(value) -> bool:
    """True for the empty cells of universal/knowledge rows: NaN, None or ""."""
    return value is None or (isinstance(value, float) and np.isnan(value)) or value == ""


def kind_rows(evals: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The rows of one ``kind``; a frame without a ``kind`` column is all ``"task"`` rows."""
    if "kind" not in evals.columns:
        return evals if kind == "task" else evals.iloc[0:0]
    return evals[evals["kind"] == kind]


def _capability_map(evals: pd.DataFrame, capabilities: Mapping[str, str] | None = None) -> dict:
    """task -> capability, from ``capabilities`` first, then the frame's own columns."""
    mapping: dict[str, str] = {}
    for task_col, cap_col in (("task", "capability"), ("eval_task", "eval_capability")):
        if task_col in evals.columns and cap_col in evals.columns:
            for task, cap in zip(evals[task_col], evals[cap_col]):
                if not _blank(task) and not _blank(cap):
                    mapping.setdefault(task, cap)
    mapping.update(capabilities or {})
    return mapping


def _capability_of(tasks: Iterable[str], mapping: Mapping[str, str]) -> list[str]:
    return [mapping.get(task, task) for task in tasks]


def _task_runs(evals: pd.DataFrame, method: str | None, name: str) -> pd.DataFrame:
    """``kind == "task"`` rows, of ``method`` only when given (ValueError if it has none)."""
    check_columns(evals, EVAL_COLUMNS, "evals")
    rows = kind_rows(evals, "task")
    if method is not None and len(rows):
        present = list(pd.unique(rows["method"]))
        if method not in present:
            raise ValueError(
                f"{name}: no searches with method {method!r} in evals; methods present: "
                f"{', '.join(map(str, present))}"
            )
        rows = rows[rows["method"] == method]
    return rows


def _sort_first_seen(
    df: pd.DataFrame, keys: Sequence[str], then: Sequence[str] = ()
) -> pd.DataFrame:
    """Stable sort by each of ``keys`` in order of first appearance, then by ``then`` values."""
    df = df.reset_index(drop=True)
    order = pd.DataFrame(
        {f"_{key}": df[key].map({v: i for i, v in enumerate(pd.unique(df[key]))}) for key in keys},
        index=df.index,
    )
    for column in then:
        order[f"_{column}"] = df[column]
    if order.empty or not len(order.columns):
        return df
    index = order.sort_values(list(order.columns), kind="stable").index
    return df.loc[index].reset_index(drop=True)


def _check_baselines(rows: pd.DataFrame, baseline: pd.Series) -> None:
    """Raise ValueError naming each (model, eval_task) that has no k = 0 row."""
    pairs = rows[["model", "eval_task"]].drop_duplicates()
    if pairs.empty:
        return
    known = pd.MultiIndex.from_frame(pairs).isin(baseline.index)
    if not known.all():
        lacking = pairs[~known].itertuples(index=False)
        names = ", ".join(f"model {m!r} eval_task {t!r}" for m, t in lacking)
        raise ValueError(f"no baseline (k = 0) rows for {names}; every delta needs one")


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


def _with_delta(rows: pd.DataFrame, baseline: pd.Series) -> pd.DataFrame:
    """``rows`` plus a ``delta`` column (score minus the model's baseline on the eval task)."""
    _check_baselines(rows, baseline)
    rows = rows.copy()
    rows["delta"] = rows["score"] - rows.join(baseline.rename("_base"), on=["model", "eval_task"])[
        "_base"
    ]
    return rows


DELTA_COLUMNS = ["capability", *RUN_KEYS, "k", "score", "delta_task", "delta_gen"]


def deltas(
    evals: pd.DataFrame, *, gen_tasks: Iterable[str] | None = None, method: str | None = None
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
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> deltas(evals)[["k", "score", "delta_task", "delta_gen"]]
       k  score  delta_task  delta_gen
    0  0   80.0         0.0        0.0
    1  1   50.0       -30.0       -1.0
    """
    task_rows = _task_runs(evals, method, "deltas")
    if task_rows.empty:
        return pd.DataFrame(columns=DELTA_COLUMNS)
    rows = task_rows.loc[:, list(EVAL_COLUMNS)].copy()
    rows["own"] = rows["eval_task"] == rows["task"]
    if gen_tasks is not None:
        rows = rows[rows["own"] | rows["eval_task"].isin(list(gen_tasks))]
    rows = _with_delta(rows, baselines(rows))

    keys = RUN_KEYS + ["k"]
    own = rows[rows["own"]].groupby(keys)[["score", "delta"]].mean()
    gen = rows[~rows["own"]].groupby(keys)["delta"].mean().rename("delta_gen")
    out = rows[keys].drop_duplicates().join(own, on=keys).join(gen, on=keys)
    out = out.rename(columns={"delta": "delta_task"})
    out.insert(0, "capability", _capability_of(out["task"], _capability_map(task_rows)))
    out = _sort_first_seen(out, ["capability", "model", "task", "search"], then=["k"])
    return out[DELTA_COLUMNS]


def _at_k(d: pd.DataFrame, k: int) -> pd.DataFrame:
    """Each run's row at ``min(k, largest k evaluated)``."""
    largest = d.groupby(["model", "task", "search"])["k"].transform("max")
    return d[d["k"] == np.minimum(largest, k)].reset_index(drop=True)


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
    check_columns(models, MODEL_COLUMNS, "models")
    columns = ["model", "layers", "heads", "total"]
    if models.empty:
        return empty_table(columns, "no models in models.tsv")
    out = models.rename(columns={"n_layers": "layers", "n_heads": "heads"})[columns]
    bad = out[out["layers"] * out["heads"] != out["total"]]
    if len(bad):
        row = bad.iloc[0]
        raise ValueError(
            f"models: total {row['total']} of model {row['model']!r} is not layers x heads = "
            f"{row['layers']} x {row['heads']}"
        )
    return out.reset_index(drop=True)


TABLE2_COLUMNS = ["capability", "model", "task", "search", "k", "delta_task", "delta_gen"]


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
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> table2(evals, k=5)[["k", "delta_task", "delta_gen"]]
       k  delta_task  delta_gen
    0  1       -30.0       -1.0
    """
    _check_k(k)
    d = deltas(evals, gen_tasks=gen_tasks, method=method)
    if d.empty:
        return empty_table(TABLE2_COLUMNS, "no task-specific searches in evals (kind == 'task')")
    return _at_k(d, k)[TABLE2_COLUMNS]


TABLE3_COLUMNS = ["capability", "model", "id_on", "eval_on", "search", "k", "delta_task",
                  "delta_gen"]


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
    ...     "model": "m", "task": "gsm8k", "capability": "math", "method": "cs", "search": "s0",
    ...     "k": [0, 0, 0, 1, 1, 1], "eval_task": ["gsm8k", "arithmetic", "boolq"] * 2,
    ...     "eval_capability": ["math", "math", "general"] * 2,
    ...     "score": [80.0, 90.0, 70.0, 50.0, 60.0, 69.0]})
    >>> table3(evals)[["id_on", "eval_on", "delta_task", "delta_gen"]]
       id_on     eval_on  delta_task  delta_gen
    0  gsm8k       gsm8k       -30.0      -15.5
    1  gsm8k  arithmetic       -30.0      -15.5
    """
    _check_k(k)
    d = deltas(evals, gen_tasks=gen_tasks, method=method)
    if d.empty:
        return empty_table(TABLE3_COLUMNS, "no task-specific searches in evals (kind == 'task')")
    chosen = _at_k(d, k)
    rows = _task_runs(evals, method, "table3")
    mapping = _capability_map(evals)
    rows = _with_delta(rows, baselines(rows))
    rows["eval_cap"] = _capability_of(rows["eval_task"], mapping)
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
    return pd.DataFrame(out, columns=TABLE3_COLUMNS)


TABLE4_COLUMNS = ["capability", "model", "task", "method", "search", "k", "delta_task",
                  "delta_gen", "n_evals"]


def table4(
    evals: pd.DataFrame,
    recoveries: pd.DataFrame,
    k: int = 5,
    *,
    gen_tasks: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Paper Table 4: every method's Delta Task, Delta Gen and number of evaluations.

    Parameters
    ----------
    evals : DataFrame
        Long evaluations frame (see :func:`deltas`); every method is used.
    recoveries : DataFrame
        ``results/tables/recoveries.tsv`` (columns ``model, task, method, search, n_evals``
        at least); gives ``n_evals`` per search.
    k : int, default 5
        Number of top heads ablated (a run with fewer uses its largest k).
    gen_tasks : iterable of str, optional
        Eval tasks averaged into Delta Gen.

    Returns
    -------
    DataFrame
        Columns ``capability, model, task, method, search, k, delta_task, delta_gen,
        n_evals``, grouped by capability, model, task, then method in order of first
        appearance. ``n_evals`` is NaN for a run without a recovery row. Empty with a note
        when ``evals`` has no task rows.

    Examples
    --------
    >>> evals = pd.DataFrame({
    ...     "model": "m", "task": "gsm8k", "method": "cs", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> recoveries = pd.DataFrame({"model": ["m"], "task": ["gsm8k"], "method": ["cs"],
    ...                            "search": ["s0"], "top_heads": ["L1H2"], "n_evals": [100]})
    >>> table4(evals, recoveries)[["method", "delta_task", "delta_gen", "n_evals"]]
      method  delta_task  delta_gen  n_evals
    0     cs       -30.0       -1.0      100
    """
    _check_k(k)
    check_columns(recoveries, ["model", "task", "method", "search", "n_evals"], "recoveries")
    d = deltas(evals, gen_tasks=gen_tasks)
    if d.empty:
        return empty_table(TABLE4_COLUMNS, "no task-specific searches in evals (kind == 'task')")
    out = _at_k(d, k)
    n_evals = recoveries.drop_duplicates(RUN_KEYS).set_index(RUN_KEYS)["n_evals"]
    out = out.join(n_evals, on=RUN_KEYS)
    out = _sort_first_seen(out, ["capability", "model", "task", "method"])
    return out[TABLE4_COLUMNS]


def _shared_heads(evals: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, list]:
    """Rows of one shared-head kind with a ``delta`` column, and the (model, head) pairs in order.

    Models keep their order of first appearance; heads are sorted by (layer, head).
    """
    check_columns(evals, SHARED_HEAD_COLUMNS, "evals")
    rows = kind_rows(evals, kind)
    ablated = rows[rows["k"] > 0]
    if ablated.empty:
        return ablated, []
    base_rows = evals[(evals["k"] == 0) & evals["model"].isin(set(ablated["model"]))]
    rows = _with_delta(ablated, baselines(base_rows))
    pairs = []
    for model in pd.unique(rows["model"]):
        heads = pd.unique(rows.loc[rows["model"] == model, "headset"])
        pairs += [(model, head) for head in sorted(heads, key=_headset_key)]
    return rows, pairs


def _headset_key(headset: str):
    return [parse_head(head) for head in str(headset).split("+")]


def _mean(values) -> float:
    values = [v for v in values if not pd.isna(v)]
    return float(np.mean(values)) if values else np.nan


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
    ...     "model": "m", "kind": "universal", "k": [0, 0, 0, 1, 1, 1],
    ...     "headset": ["none"] * 3 + ["L0H3"] * 3, "eval_task": ["gsm8k", "mbpp", "boolq"] * 2,
    ...     "score": [80.0, 50.0, 70.0, 40.0, 45.0, 60.0]})
    >>> table5(evals, gen_tasks=["boolq"], capabilities={"gsm8k": "math", "mbpp": "code",
    ...                                                  "boolq": "general"})
      model  head  delta_math  delta_code  delta_gen
    0     m  L0H3       -40.0        -5.0      -10.0
    """
    rows, pairs = _shared_heads(evals, "universal")
    mapping = _capability_map(evals, capabilities)
    gen = None if gen_tasks is None else set(gen_tasks)
    # the columns of an empty table come from the configured capabilities
    eval_tasks = list(pd.unique(rows["eval_task"])) if len(rows) else list(capabilities or {})
    caps: list[str] = []
    for cap in [*(capabilities or {}).values(), *_capability_of(eval_tasks, mapping)]:
        members = [t for t in eval_tasks if mapping.get(t, t) == cap]
        if cap not in caps and members and not (gen is not None and set(members) <= gen):
            caps.append(cap)
    columns = ["model", "head", *(f"delta_{cap}" for cap in caps), "delta_gen"]
    if not pairs:
        return empty_table(columns, "no universal heads in evals (kind == 'universal')")
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


TABLE6_COLUMNS = ["capability", "model", "task", "search", "n_heads", "score", "delta_task",
                  "delta_gen"]


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
    ...     "model": "m", "task": "gsm8k", "method": "cs_stratified", "search": "s0",
    ...     "k": [0, 0, 1, 1], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 50.0, 69.0]})
    >>> table6(evals)[["n_heads", "score", "delta_task", "delta_gen"]]
      n_heads  score  delta_task  delta_gen
    0      BL   80.0         NaN        NaN
    1       1   50.0       -30.0       -1.0
    """
    d = deltas(evals, gen_tasks=gen_tasks, method=method)
    if d.empty:
        return empty_table(TABLE6_COLUMNS, "no task-specific searches in evals (kind == 'task')")
    is_baseline = d["k"] == 0
    d[["delta_task", "delta_gen"]] = d[["delta_task", "delta_gen"]].mask(is_baseline)
    n_heads = [BASELINE if k == 0 else int(k) for k in d["k"]]
    d["n_heads"] = pd.Series(n_heads, index=d.index, dtype=object)
    return d[TABLE6_COLUMNS]


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
    ...     "model": "m", "kind": "universal", "k": [0, 0, 1, 1],
    ...     "headset": ["none", "none", "L1H2", "L1H2"], "eval_task": ["gsm8k", "boolq"] * 2,
    ...     "score": [80.0, 70.0, 40.0, 65.0]})
    >>> table7(evals)
      model  head  gsm8k  boolq   avg
    0     m    BL   80.0   70.0  75.0
    1     m  L1H2  -40.0   -5.0 -22.5
    """
    rows, pairs = _shared_heads(evals, "universal")
    if not pairs:
        return empty_table(["model", "head", "avg"],
                           "no universal heads in evals (kind == 'universal')")
    tasks = list(pd.unique(kind_rows(evals, "universal")["eval_task"]))
    return _head_rows(rows, pairs, evals, [(tasks, "avg")])


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
    ...     "model": "m", "kind": "knowledge", "k": [0, 0, 0, 1, 1, 1],
    ...     "headset": ["none"] * 3 + ["L0H22"] * 3,
    ...     "eval_task": ["mmlu", "wmdp_bio", "gsm8k"] * 2,
    ...     "score": [46.0, 56.0, 33.0, 25.0, 26.0, 34.0]})
    >>> table8(evals, ["mmlu", "wmdp_bio"]).iloc[:, 1:]
        head  mmlu  wmdp_bio  knowledge_mc_avg  gsm8k  other_avg
    0     BL  46.0      56.0              51.0   33.0       33.0
    1  L0H22 -21.0     -30.0             -25.5    1.0        1.0
    """
    rows, pairs = _shared_heads(evals, "knowledge")
    knowledge = list(knowledge_eval_tasks)
    if not pairs:
        return empty_table(["model", "head", *knowledge, KNOWLEDGE_AVG, OTHER_AVG],
                           "no knowledge heads in evals (kind == 'knowledge')")
    present = list(pd.unique(kind_rows(evals, "knowledge")["eval_task"]))
    unknown = [task for task in knowledge if task not in present]
    if unknown:
        raise ValueError(
            f"table8: knowledge eval task(s) {', '.join(unknown)} not evaluated with the "
            f"knowledge heads; evaluated: {', '.join(present)}"
        )
    other = [task for task in present if task not in knowledge]
    return _head_rows(rows, pairs, evals, [(knowledge, KNOWLEDGE_AVG), (other, OTHER_AVG)])


def _head_list(value) -> list[str]:
    """Top heads as a list, from a list/array or from a string such as "L1H2, L3H4"."""
    if isinstance(value, str):
        return [match.group(0) for match in HEAD_PATTERN.finditer(value)]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(head) for head in value]


TABLE9_COLUMNS = ["model", "capability", "task", "method", "search", "heads", "n_evals"]


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
    check_columns(recoveries, RECOVERY_COLUMNS, "recoveries")
    _check_k(k)
    if recoveries.empty:
        return empty_table(TABLE9_COLUMNS, "no searches in recoveries")
    out = recoveries.loc[:, RUN_KEYS].copy()
    if "capability" in recoveries.columns:
        caps = [task if _blank(c) else c for task, c in zip(out["task"], recoveries["capability"])]
    else:
        caps = list(out["task"])
    out["capability"] = caps
    out["heads"] = [", ".join(_head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    out = _sort_first_seen(out, ["model", "capability", "task", "method"])
    return out[TABLE9_COLUMNS]


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
    check_columns(recoveries, RECOVERY_COLUMNS, "recoveries")
    _check_k(k)
    columns = [*RUN_KEYS, "heads", "n_evals"]
    if recoveries.empty:
        return empty_table(columns, "no searches in recoveries")
    if method is not None:
        present = list(pd.unique(recoveries["method"]))
        if method not in present:
            raise ValueError(f"table10: no searches with method {method!r} in recoveries; "
                             f"methods present: {', '.join(map(str, present))}")
        recoveries = recoveries[recoveries["method"] == method]
    out = recoveries.loc[:, RUN_KEYS].copy()
    out["heads"] = [", ".join(_head_list(heads)[:k]) for heads in recoveries["top_heads"]]
    out["n_evals"] = recoveries["n_evals"].to_numpy()
    return _sort_first_seen(out, ["model", "task"])[columns]


TUNING_TABLE_COLUMNS = ["model", "task", "method", "n_masks", "sparsity", "top_heads",
                        "baseline", "ablated", "degradation", "chosen"]
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
    check_columns(tuning, TUNING_COLUMNS, "tuning")
    if tuning.empty:
        return empty_table(TUNING_TABLE_COLUMNS, "no hyperparameter search configured "
                                                 "(tuning.tasks is empty)")
    out = tuning.copy()
    out["top_heads"] = [", ".join(_head_list(heads)) for heads in out["top_heads"]]
    chosen = out["chosen"].map(lambda v: str(v).strip().lower() in ("true", "1", "yes"))
    out["chosen"] = np.where(chosen, CHOSEN_MARK, "")
    out = _sort_first_seen(out, ["model", "task", "method"], then=["n_masks", "sparsity"])
    # a grid value, not a measurement: shown as written (0.25, not 0.2 after one-decimal rounding)
    out["sparsity"] = [f"{value:g}" for value in out["sparsity"]]
    return out[TUNING_TABLE_COLUMNS]
