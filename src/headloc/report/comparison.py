"""Searches compared with a reference: every method against greedy, seed by seed
(:func:`vs_greedy_table`, the records of :mod:`headloc.benchmarks.vs_greedy`), and one search's scores in
two runs, e.g. in two dtypes (:func:`score_agreement`).

>>> print(mean_se([-50.0, -60.0]), mean_se([-50.0]), mean_se([]))
-55.0 ± 5.0 -50.0 -
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from headloc.data.units import change, display_unit

REFERENCE = "greedy"
HEADER = ("| task | method | seeds | Delta Task (pp; another unit named in brackets) | minus greedy's "
          "| top-5 overlap with greedy | evaluations | share of greedy's | seconds "
          "| Delta Task, universal heads left out |")


def mean_se(values) -> str:
    """Mean and standard error of the values that are not NaN, signed; the mean alone for one value."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return "-"
    if len(values) == 1:
        return f"{values.mean():+.1f}"
    return f"{values.mean():+.1f} ± {values.std(ddof=1) / np.sqrt(len(values)):.1f}"


def _mean(values, form: str) -> str:
    """The mean of the values that are not NaN in ``form``; "-" where there are none (no greedy
    record of the task to compare with)."""
    values = np.asarray(values, dtype=float)
    return form.format(np.nanmean(values)) if (~np.isnan(values)).any() else "-"


def vs_greedy_table(records: list[dict]) -> str:
    """The markdown table of validation records: per task and method, over the seeds validated,
    Delta Task (mean +- s.e., in each record's unit, :func:`record_unit`: percentage points of a
    fraction metric; a metric's own unit, the task then named ``<task> (<metric>)``; percent of the
    unablated score, ``<task> (% of unablated <metric>)``), its gap to greedy's on
    the same seed, the overlap of the top k with greedy's, masked evaluations (and their share of
    greedy's) and seconds per search. A record with the search's own continuous score on the full
    data (``id_metric``) adds a row ``<task> (<metric>)`` in that metric's own unit."""
    frame = pd.DataFrame(records).drop_duplicates(["task", "seed", "method"])
    own = frame.dropna(subset=["id_metric"]).copy() if "id_metric" in frame else frame.iloc[:0]
    own["task"] = own["task"] + " (" + own.get("id_metric", "") + ")"
    own["delta"] = own.get("id_ablated", np.nan) - own.get("id_clean", np.nan)
    own["filtered"] = own.get("id_filtered_ablated", np.nan) - own.get("id_clean", np.nan)
    frame["unit"] = [record_unit(record) for record in frame.to_dict("records")]
    metrics = frame["metric"] if "metric" in frame else pd.Series(None, index=frame.index, dtype=object)
    frame["task"] = [task + unit_label(unit, metric if isinstance(metric, str) else None)
                     for task, unit, metric in zip(frame.task, frame.unit, metrics)]
    frame["delta"] = _change(frame["ablated"], frame["clean"], frame["unit"])
    filtered = frame["filtered_ablated"] if "filtered_ablated" in frame else np.full(len(frame), np.nan)
    frame["filtered"] = _change(filtered, frame["clean"], frame["unit"])
    frame = pd.concat([frame, own], ignore_index=True)
    frame = _against_greedy(frame)
    lines = [HEADER, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (task, method), g in frame.groupby(["task", "method"], sort=False):
        lines.append(f"| {task} | {method} | {len(g)} | {mean_se(g.delta)} | {mean_se(g.gap)} | "
                     f"{_mean(g.overlap, '{:.1f}')} | {g.n_evals.mean():.0f} | {_mean(100 * g.share, '{:.1f} %')} | "
                     f"{g.seconds.mean():.1f} | {mean_se(g.filtered)} |")
    return "\n".join(lines)


def _against_greedy(frame: pd.DataFrame) -> pd.DataFrame:
    """Each row's ``gap`` (its Delta Task minus greedy's), ``overlap`` (of its top with greedy's) and
    ``share`` (of greedy's evaluations), greedy's record of the same task and seed; NaN without one."""
    greedy = frame[frame.method == REFERENCE].set_index(["task", "seed"])
    keys = list(zip(frame.task, frame.seed))
    frame["gap"] = [d - greedy["delta"].get(key, np.nan) for key, d in zip(keys, frame.delta)]
    frame["overlap"] = [len(set(top) & set(greedy["top"].get(key, []))) if key in greedy.index else np.nan
                        for key, top in zip(keys, frame.top)]
    frame["share"] = [n / greedy["n_evals"].get(key, np.nan) for key, n in zip(keys, frame.n_evals)]
    return frame


def score_agreement(scores_a, scores_b, top_a: list[str], top_b: list[str]) -> dict:
    """How far one search's scores of the same masks in two runs differ: the largest and mean
    difference, both against the spread (standard deviation) of run A's scores over the masks (what
    a search tells heads apart by), their rank correlation, and the two top heads' overlap."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if a.shape != b.shape or len(a) < 2:
        raise ValueError(f"expected the scores of the same masks (at least 2) in both runs, got {len(a)} and {len(b)}")
    difference = np.abs(a - b)
    spread = float(np.std(a))
    return {"masks": len(a), "max_diff": float(difference.max()), "mean_diff": float(difference.mean()),
            "spread": spread, "max_diff_per_spread": float(difference.max() / spread),
            "spearman": float(spearmanr(a, b).statistic), "top_a": list(top_a), "top_b": list(top_b),
            "top_overlap": len(set(top_a) & set(top_b)), "top1_same": list(top_a[:1]) == list(top_b[:1])}


def record_unit(record: dict) -> str:
    """A validation record's display unit: its ``unit``, else its ``metric``'s
    (:func:`headloc.data.units.display_unit`); a record naming neither is refused, not guessed."""
    if isinstance(record.get("unit"), str):
        return record["unit"]
    if isinstance(record.get("metric"), str):
        return display_unit(record["metric"])
    raise ValueError(f"the validation record of {record.get('task')!r} seed {record.get('seed')!r} "
                     f"({record.get('method')!r}) names no metric or unit, so its unit is unknown; "
                     "validate it again: the comparison's records name both now")


def unit_label(unit: str, metric: str | None) -> str:
    """What a row's task name adds for a unit other than percentage points."""
    name = metric or "score"
    return {"own": f" ({name})", "relative": f" (% of unablated {name})"}.get(unit, "")


def _change(values, clean, units) -> list[float]:
    return [np.nan if v != v else change(v, c, u) for v, c, u in zip(values, clean, units)]
