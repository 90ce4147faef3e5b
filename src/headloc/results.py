"""Recovery and validation records to the tidy tables that every paper table is cut from.

A recovery record is the content of ``recovery.json``; an evaluation record the content of
``evals/{task}/{headset}.json``. Scores are put in display units here, once: a fraction becomes a
percentage, and a task marked relative (swearing) becomes percent of its unablated baseline.
"""

from __future__ import annotations

import math

import pandas as pd

from headloc.heads import format_headset

RECOVERY_COLUMNS = ["model", "task", "method", "search", "top_heads", "n_evals", "r2", "alpha"]
EVAL_COLUMNS = ["model", "task", "method", "search", "k", "headset", "eval_task", "score"]


def display_score(value: float, baseline: float, relative: bool) -> float:
    """Percent (fractions) or percent of the baseline (relative tasks; NaN if the baseline is 0)."""
    if relative:
        return 100.0 * value / baseline if baseline else math.nan
    return 100.0 * value


def recoveries_frame(recoveries: list[dict]) -> pd.DataFrame:
    """One row per search; ``top_heads`` is a list of head names, best first."""
    rows = [{column: record[column] for column in RECOVERY_COLUMNS} for record in recoveries]
    return pd.DataFrame(rows, columns=RECOVERY_COLUMNS)


def evals_frame(recoveries: list[dict], evals: list[dict], relative_tasks=()) -> pd.DataFrame:
    """One row per (search, k = 0..len(top_heads), evaluated task), with the score in display units.

    Raises KeyError naming the (model, task, head set) of an evaluation that is missing.
    """
    values = {(e["model"], e["task"], e["headset"]): e["value"] for e in evals}
    eval_tasks = {}
    for e in evals:
        eval_tasks.setdefault(e["model"], []).append(e["task"])
    rows = []
    for record in recoveries:
        model = record["model"]
        for k in range(len(record["top_heads"]) + 1):
            headset = format_headset(record["top_heads"][:k])
            for eval_task in dict.fromkeys(eval_tasks.get(model, [])):
                key = (model, eval_task, headset)
                if key not in values:
                    raise KeyError(f"no evaluation of model {model}, task {eval_task}, heads {headset}")
                baseline = values[(model, eval_task, "none")]
                rows.append({
                    "model": model, "task": record["task"], "method": record["method"],
                    "search": record["search"], "k": k, "headset": headset, "eval_task": eval_task,
                    "score": display_score(values[key], baseline, eval_task in relative_tasks),
                })
    return pd.DataFrame(rows, columns=EVAL_COLUMNS)
