"""Tidy-frame helpers shared by the tables and the figures: checks, baselines, deltas.

Every check a table or a figure makes on its input is written here once: the columns a frame
must have (:func:`check_columns`), the number of heads (:func:`check_k`), the main method
(:func:`only_method`), the knowledge eval tasks (:func:`check_knowledge_eval_tasks`), and that
every delta has a baseline (:func:`check_baselines`).

The long evaluations frame (``results/tables/evals_<scope>.tsv``, written by
:func:`headloc.workflow.results.evals_frame`) has one row per full-dataset evaluation: ``model, kind,
task, capability, method, search, k, headset, eval_task, eval_capability, score, higher_is_better``
(the direction of the eval task's metric, as its YAML or lm-eval declares it). ``kind`` says
where the head set came from: ``"task"`` (the top-k heads of a search), ``"universal"`` and
``"knowledge"`` (one shared head, k = 1) or ``"extra"`` (user-given head sets, ignored here). A
frame without a ``kind`` column is read as all ``"task"`` rows; without
``capability``/``eval_capability`` a task is its own capability. Scores arrive in display units
(accuracy in percent, or percent of the unablated baseline for "relative" tasks; a metric in its
own unit, such as a perplexity, unchanged), so a delta is in percentage points or that unit.

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

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from headloc.heads import parse_head

# The columns each input must have (the collected frames of headloc.workflow.results carry more).
TASK_EVALS_NEED = ("model", "task", "method", "search", "k", "eval_task", "score", "higher_is_better")
SHARED_EVALS_NEED = ("model", "k", "headset", "eval_task", "score", "higher_is_better")
RECOVERIES_NEED = ("model", "task", "method", "search", "top_heads", "n_evals")
MODELS_NEED = ("model", "n_layers", "n_heads", "total")
TUNING_NEED = ("model", "task", "method", "n_masks", "sparsity", "top_heads", "baseline",
               "ablated", "degradation", "chosen")

RUN_KEYS = ("model", "task", "method", "search")
DELTA_COLUMNS = ("capability", *RUN_KEYS, "k", "score", "delta_task", "delta_gen")

# Why a table or figure is legitimately empty (its ``attrs["note"]``, or its "no data" text).
NO_TASK_RUNS = "no task-specific searches in evals (kind == 'task')"
NO_UNIVERSAL_HEADS = "no universal heads in evals (kind == 'universal')"
NO_KNOWLEDGE_HEADS = "no knowledge heads in evals (kind == 'knowledge')"
NO_KNOWLEDGE_TASKS = "no knowledge tasks configured (knowledge.tasks is empty)"
NO_SEARCHES = "no searches in recoveries"
NO_MODELS = "no models in models.tsv"
NO_TUNING = "no hyperparameter search configured (tuning.tasks is empty)"


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


def check_k(k: int) -> None:
    """Raise ValueError unless ``k`` (a number of heads) is at least 0.

    Examples
    --------
    >>> check_k(-1)
    Traceback (most recent call last):
    ...
    ValueError: k must be >= 0, got -1
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def empty_table(columns: Sequence[str], note: str) -> pd.DataFrame:
    """An empty table with the given columns and ``attrs["note"]`` saying why it is empty.

    Examples
    --------
    >>> t = empty_table(["model", "head"], NO_UNIVERSAL_HEADS)
    >>> list(t.columns), len(t), t.attrs["note"]
    (['model', 'head'], 0, "no universal heads in evals (kind == 'universal')")
    """
    table = pd.DataFrame(columns=list(columns))
    table.attrs["note"] = note
    return table


def is_blank(value) -> bool:
    """True for the empty cells of universal/knowledge rows: NaN, None or "".

    Examples
    --------
    >>> [is_blank(v) for v in (float("nan"), None, "", "gsm8k", 0)]
    [True, True, True, False, False]
    """
    return value is None or (isinstance(value, float) and bool(np.isnan(value))) or value == ""


def kind_rows(evals: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The rows of one ``kind``; a frame without a ``kind`` column is all ``"task"`` rows.

    Examples
    --------
    >>> evals = pd.DataFrame({"kind": ["task", "universal"], "score": [1.0, 2.0]})
    >>> kind_rows(evals, "universal")["score"].tolist(), len(kind_rows(evals[["score"]], "task"))
    ([2.0], 2)
    """
    if "kind" not in evals.columns:
        return evals if kind == "task" else evals.iloc[0:0]
    return evals[evals["kind"] == kind]


def capability_map(evals: pd.DataFrame, capabilities: Mapping[str, str] | None = None) -> dict:
    """task -> capability: ``capabilities`` first, then the frame's own capability columns.

    Both ``task``/``capability`` and ``eval_task``/``eval_capability`` pairs are read; blank
    cells (rows of shared heads) are skipped. A task in neither is absent (see
    :func:`capabilities_of`).

    Examples
    --------
    >>> evals = pd.DataFrame({"task": ["gsm8k", ""], "capability": ["math", ""],
    ...                       "eval_task": ["gsm8k", "boolq"],
    ...                       "eval_capability": ["math", "general"]})
    >>> capability_map(evals, {"boolq": "reading"})
    {'gsm8k': 'math', 'boolq': 'reading'}
    """
    mapping: dict[str, str] = {}
    for task_col, cap_col in (("task", "capability"), ("eval_task", "eval_capability")):
        if task_col in evals.columns and cap_col in evals.columns:
            for task, cap in zip(evals[task_col], evals[cap_col]):
                if not is_blank(task) and not is_blank(cap):
                    mapping.setdefault(task, cap)
    mapping.update(capabilities or {})
    return mapping


def capabilities_of(tasks: Iterable[str], mapping: Mapping[str, str]) -> list[str]:
    """The capability of each task; a task the mapping lacks is its own capability.

    Examples
    --------
    >>> capabilities_of(["gsm8k", "swear"], {"gsm8k": "math"})
    ['math', 'swear']
    """
    return [mapping.get(task, task) for task in tasks]


def only_method(frame: pd.DataFrame, method: str | None, *, name: str, source: str) -> pd.DataFrame:
    """The rows of one search ``method`` (all rows when it is None or ``frame`` is empty).

    Parameters
    ----------
    frame : DataFrame
        Rows with a ``method`` column (task evaluations, or recoveries).
    method : str or None
        The main method.
    name, source : str
        The caller (``"table10"``) and what ``frame`` is (``"recoveries"``), for the message.

    Raises
    ------
    ValueError
        If ``frame`` has rows but none of ``method``; the message names the methods present.

    Examples
    --------
    >>> runs = pd.DataFrame({"method": ["greedy", "cs"], "search": ["g", "s0"]})
    >>> only_method(runs, "cs", name="table10", source="recoveries")["search"].tolist()
    ['s0']
    >>> only_method(runs, "lasso", name="table10", source="recoveries")
    Traceback (most recent call last):
    ...
    ValueError: table10: no searches with method 'lasso' in recoveries; methods present: greedy, cs
    """
    if method is None or frame.empty:
        return frame
    present = list(pd.unique(frame["method"]))
    if method not in present:
        raise ValueError(
            f"{name}: no searches with method {method!r} in {source}; methods present: "
            f"{', '.join(map(str, present))}"
        )
    return frame[frame["method"] == method]


def task_runs(evals: pd.DataFrame, method: str | None = None, name: str = "evals",
              kind: str = "task") -> pd.DataFrame:
    """The ``kind == "task"`` rows of ``evals`` (or of another per-search ``kind``, such as
    ``"unfiltered"``), of ``method`` only when given.

    Raises ValueError if a column of :data:`TASK_EVALS_NEED` is missing, or as
    :func:`only_method` does (``name`` is the caller, for the message).

    Examples
    --------
    >>> evals = pd.DataFrame({"model": "m", "kind": ["task", "universal"], "task": ["t", ""],
    ...                       "method": ["cs", ""], "search": ["s", ""], "k": 1, "higher_is_better": True,
    ...                       "eval_task": "t", "score": [1.0, 2.0]})
    >>> task_runs(evals, "cs")["score"].tolist()
    [1.0]
    """
    check_columns(evals, TASK_EVALS_NEED, "evals")
    return only_method(kind_rows(evals, kind), method, name=name, source="evals")


def check_knowledge_eval_tasks(
    evals: pd.DataFrame, knowledge_eval_tasks: Sequence[str], name: str
) -> list[str]:
    """The eval tasks evaluated with the knowledge heads; every knowledge eval task among them.

    Raises
    ------
    ValueError
        If a task of ``knowledge_eval_tasks`` was not evaluated with the knowledge heads
        (``kind == "knowledge"`` rows); the message names it and what was evaluated.

    Examples
    --------
    >>> evals = pd.DataFrame({"kind": "knowledge", "eval_task": ["mmlu", "gsm8k"]})
    >>> check_knowledge_eval_tasks(evals, ["mmlu"], "table8")
    ['mmlu', 'gsm8k']
    >>> check_knowledge_eval_tasks(evals, ["wmdp_bio"], "table8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: table8: knowledge eval task(s) wmdp_bio not evaluated ...; evaluated: mmlu, gsm8k
    """
    present = list(pd.unique(kind_rows(evals, "knowledge")["eval_task"]))
    unknown = [task for task in knowledge_eval_tasks if task not in present]
    if unknown:
        raise ValueError(
            f"{name}: knowledge eval task(s) {', '.join(unknown)} not evaluated with the "
            f"knowledge heads; evaluated: {', '.join(present)}"
        )
    return present


def sort_first_seen(
    df: pd.DataFrame, keys: Sequence[str], then: Sequence[str] = ()
) -> pd.DataFrame:
    """Stable sort by each of ``keys`` in order of first appearance, then by ``then`` values.

    Examples
    --------
    >>> df = pd.DataFrame({"task": ["swear", "gsm8k", "swear"], "k": [2, 1, 1]})
    >>> sort_first_seen(df, ["task"], then=["k"]).values.tolist()
    [['swear', 1], ['swear', 2], ['gsm8k', 1]]
    """
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
