"""Tables 1-3: the models, and each run's top heads validated on its own task and on the others
(Delta Task, Delta Gen) and on every task of the same capability."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from headloc.report.capabilities import capabilities_of, capability_map
from headloc.report.delta import baselines, deltas, with_delta
from headloc.report.frames import MODELS_NEED, NO_MODELS, NO_TASK_RUNS, check_columns, check_k, empty_table, task_runs
from headloc.report.spec import TableSpec
from headloc.report.tables.registry import add, at_k


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


add(TableSpec(
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
    return at_k(d, k)[list(TABLE2_COLUMNS)]


add(TableSpec(
    name="table2",
    about="Delta Task and Delta Gen of the top-k task-specific heads.",
    inputs=("evals_main",),
    columns=TABLE2_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 2. Change in task score (Delta Task) and in the mean of {gen} (Delta Gen), "
            "{unit}, top {k} heads ({main}) ablated",
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
    chosen = at_k(d, k)
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


add(TableSpec(
    name="table3",
    about="Heads found on one dataset, evaluated on the others of its capability.",
    inputs=("evals_main",),
    columns=TABLE3_COLUMNS,
    empty_note=NO_TASK_RUNS,
    caption="Table 3. Heads identified on one task (id on), top {k} ({main}) ablated, "
            "evaluated on every task of the same capability (eval on); {unit}",
    builder=lambda evals, options: table3(evals, k=options.top_k, gen_tasks=options.gen_tasks,
                                          method=options.method),
    deltas=True,
))
