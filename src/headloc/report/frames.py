"""Tidy-frame helpers shared by the tables and the figures: the evaluations frame and its checks.

Every check a table or a figure makes on its input is written once: here the columns a frame
must have (:func:`check_columns`), the number of heads (:func:`check_k`), the main method
(:func:`only_method`) and the knowledge eval tasks (:func:`check_knowledge_eval_tasks`); with the
deltas (:mod:`headloc.report.delta`), that every delta has a baseline
(:func:`headloc.report.delta.check_baselines`).

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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

# The columns each input must have (the collected frames of headloc.workflow.results carry more).
TASK_EVALS_NEED = ("model", "task", "method", "search", "k", "eval_task", "score", "higher_is_better")
SHARED_EVALS_NEED = ("model", "k", "headset", "eval_task", "score", "higher_is_better")
RECOVERIES_NEED = ("model", "task", "method", "search", "top_heads", "n_evals")
MODELS_NEED = ("model", "n_layers", "n_heads", "total")
TUNING_NEED = ("model", "task", "method", "n_masks", "sparsity", "top_heads", "baseline",
               "ablated", "degradation", "chosen")

RUN_KEYS = ("model", "task", "method", "search")

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
