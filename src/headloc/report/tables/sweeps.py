"""Table 6 and the appendix A.1 tuning table: the score as more top heads are ablated, and the
degradation over the hyperparameter grid."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from headloc.report.delta import deltas
from headloc.report.frames import NO_TASK_RUNS, NO_TUNING, TUNING_NEED, check_columns, empty_table, sort_first_seen
from headloc.report.spec import TableSpec
from headloc.report.tables.registry import BASELINE, add, head_list


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


add(TableSpec(
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
    out["top_heads"] = [", ".join(head_list(heads)) for heads in out["top_heads"]]
    chosen = out["chosen"].map(lambda v: str(v).strip().lower() in ("true", "1", "yes"))
    out["chosen"] = np.where(chosen, CHOSEN_MARK, "")
    out = sort_first_seen(out, ["model", "task", "method"], then=["n_masks", "sparsity"])
    # a grid value, not a measurement: shown as written (0.25, not 0.2 after one-decimal rounding)
    out["sparsity"] = [f"{value:g}" for value in out["sparsity"]]
    return out[list(TUNING_TABLE_COLUMNS)]


add(TableSpec(
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
