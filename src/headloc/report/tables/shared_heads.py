"""Tables 5, 7 and 8: heads shared by tasks, universal heads (per capability and per task) and
knowledge multiple-choice heads, each ablated alone."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from headloc.report.capabilities import capabilities_of, capability_map
from headloc.report.delta import baselines, shared_heads
from headloc.report.frames import (
    NO_KNOWLEDGE_HEADS, NO_UNIVERSAL_HEADS, check_knowledge_eval_tasks, empty_table, kind_rows
)
from headloc.report.spec import TableSpec
from headloc.report.tables.registry import BASELINE, KNOWLEDGE_AVG, OTHER_AVG, add, mean


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
            row[f"delta_{cap}"] = mean(per_task[members])
        in_gen = per_task if gen is None else per_task[per_task.index.isin(gen)]
        row["delta_gen"] = mean(in_gen)
        out.append(row)
    return pd.DataFrame(out, columns=columns)


add(TableSpec(
    name="table5",
    about="Universal heads: mean Delta per capability.",
    inputs=("evals_universal",),
    columns=TABLE5_COLUMNS,
    empty_note=NO_UNIVERSAL_HEADS,
    caption="Table 5. Universal heads: mean change per capability when one head is ablated "
            "({unit})",
    builder=lambda evals, options: table5(evals, gen_tasks=options.gen_tasks,
                                          capabilities=options.capabilities),
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
                row[avg] = mean([row[task] for task in tasks])
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


add(TableSpec(
    name="table7",
    about="Universal heads: Delta on every task.",
    inputs=("evals_universal",),
    columns=TABLE7_COLUMNS,
    empty_note=NO_UNIVERSAL_HEADS,
    caption="Table 7. Universal heads: unablated scores (BL) and the change on every task when "
            "one head is ablated ({unit})",
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


add(TableSpec(
    name="table8",
    about="Knowledge multiple-choice heads: Delta on every task.",
    inputs=("evals_knowledge",),
    columns=TABLE8_COLUMNS,
    empty_note=NO_KNOWLEDGE_HEADS,
    caption="Table 8. Knowledge multiple-choice heads: unablated scores (BL) and the change "
            "when one head is ablated, knowledge MC tasks grouped apart ({unit})",
    builder=lambda evals, options: table8(evals, options.knowledge_eval_tasks),
    deltas=True,
))
