"""Recovery and validation records to the tidy tables that every paper table is cut from.

A recovery record is the content of ``recovery.json``; an evaluation record the content of
``evals/{task}/{headset}.json``. A *selection* names heads a table reports: a search's
task-specific top-k (``kind`` "task", ablated cumulatively), a universal or knowledge head (ablated
alone), or an extra head set from the config. Scores are put in display units here, once: a
fraction becomes a percentage, and a task marked relative (swearing) becomes percent of its
unablated baseline, and any other metric (a perplexity) stays in its own unit
(:meth:`headloc.workflow.plan.Plan.unit`). Each score keeps its metric's direction beside it
(column ``higher_is_better``): the report orients every change by it, so that a negative delta is
always damage (:func:`headloc.report.delta.with_delta`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from headloc.data.units import display_score
from headloc.heads import format_headset
from headloc.search.evidence import head_evidence
from headloc.workflow.selection import select_heads

# The columns of each collected table (results/tables/*.tsv). The report reads these tables and
# names what each of its builders needs in headloc.report.frames (TASK_EVALS_NEED, ...).
RECOVERIES_FRAME_COLUMNS = ["model", "task", "capability", "method", "search", "top_heads", "n_evals", "r2",
                            "alpha", "unconfirmed", "found", "no_head_found", "effects"]
EVALS_FRAME_COLUMNS = ["model", "kind", "task", "capability", "method", "search", "k", "headset", "eval_task",
                       "eval_capability", "score", "higher_is_better"]
MODELS_FRAME_COLUMNS = ["model", "source", "n_layers", "n_heads", "n_kv_heads", "total"]
TUNING_FRAME_COLUMNS = ["model", "task", "method", "n_masks", "sparsity", "search", "top_heads", "baseline",
                        "ablated", "degradation", "chosen"]


def eval_record(model: str, task: str, headset: str, heads: Sequence[str], metric_key: str, result) -> dict:
    """The evaluation record of ``task`` with ``headset`` (its ``heads``) ablated, scored by
    ``metric_key`` (lm-eval's ``metric,filter``): ``result`` (a
    :class:`headloc.engine.evaluation.MaskResult`) as ``evals/{task}/{headset}.json`` holds it."""
    return {"model": model, "task": task, "headset": headset, "heads": list(heads), "metric": metric_key,
            "value": result.score, "n_docs": len(result.samples), "samples": result.samples}


def selections(recoveries: Sequence[dict], *, main: Mapping[str, str], capabilities: Mapping[str, str],
               k: int, universal: Mapping, knowledge: Mapping, extra: Sequence[str] = ()) -> list[dict]:
    """Every selection of every model with a recovery (see :func:`headloc.workflow.selection.select_heads`).

    Each is ``{"model", "kind", "task", "method", "search", "heads", "cumulative"}``; task, method
    and search are empty for the kinds that do not come from one search. Only the main search's
    task heads are ``cumulative`` (validated as top 1, top 2, ..., top k: Figure 1 and the tables'
    k); every other search's only as its top k. ``"unfiltered"`` selections (a search's own top k,
    universal heads kept) exist only when the universal filter is on (otherwise they are the task
    heads).
    """
    by_model: dict[str, list[dict]] = {}
    for record in recoveries:
        by_model.setdefault(record["model"], []).append(record)
    out = []
    for model, records in by_model.items():
        rankings = {(r["task"], r["search"]): r["ranking"] for r in records}
        methods = {(r["task"], r["search"]): r["method"] for r in records}
        picked = select_heads(rankings, main, capabilities, k=k, universal=universal, knowledge=knowledge,
                              model=model)
        for kind in ("task", "unfiltered") if universal["filter"] else ("task",):
            for (task, search), heads in picked[kind].items():
                out.append({"model": model, "kind": kind, "task": task, "method": methods[(task, search)],
                            "search": search, "heads": heads,
                            "cumulative": kind == "task" and main.get(task) == search})
        for kind in ("universal", "knowledge"):
            out += [{"model": model, "kind": kind, "task": "", "method": "", "search": "", "heads": [head]}
                    for head in picked[kind]]
        out += [{"model": model, "kind": "extra", "task": "", "method": "", "search": "",
                 "heads": spelling.split("+")} for spelling in extra]
    return out


def recoveries_frame(recoveries: Sequence[dict], chosen: Sequence[dict] = (),
                     capabilities: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per search; ``top_heads`` is the selection's heads (universal heads filtered) when
    ``chosen`` has the search, else the recovery's own top heads; ``unconfirmed`` those of them its
    search did not confirm alone (a search that confirms heads, stopped short: recovery.json's
    ``confirmed``; none for a search that confirms none)."""
    heads = {(s["model"], s["task"], s["search"]): s["heads"] for s in chosen if s["kind"] == "task"}
    capabilities = capabilities or {}
    rows = []
    for record in recoveries:
        key = (record["model"], record["task"], record["search"])
        shown, confirmed = list(heads.get(key, record["top_heads"])), record.get("confirmed")
        found = record.get("found")
        rows.append({**{c: record.get(c) for c in RECOVERIES_FRAME_COLUMNS},
                     "capability": capabilities.get(record["task"], record["task"]), "top_heads": shown,
                     "unconfirmed": [] if confirmed is None else [h for h in shown if h not in confirmed],
                     # None: not assessed (no_head_found says why); else the shown heads found above noise
                     "found": None if found is None else [h for h in shown if h in found],
                     "no_head_found": record.get("no_head_found", "not assessed: written before evidence was kept"),
                     "effects": [effect_words(record, head) for head in shown]})
    return pd.DataFrame(rows, columns=RECOVERIES_FRAME_COLUMNS)


def effect_words(record: Mapping, head: str) -> str:
    """A head, its value in a recovery, and its 95 % interval and P(in the top k) where it has them:
    ``L1H5 -1.98 [-2.31, -1.62] P 0.97`` (``+ 0.0``: a Lasso's -0.0 reads as 0)."""
    value, interval, p_top_k = head_evidence(record, head)
    return " ".join([head, value, *([interval] if interval else []), *([f"P {p_top_k}"] if p_top_k else [])])


def evals_frame(chosen: Sequence[dict], evals: Sequence[dict], units: Mapping[str, str] | None = None,
                capabilities: Mapping[str, str] | None = None, *, directions: Mapping[str, bool]) -> pd.DataFrame:
    """One row per (selection, number of heads ablated k, evaluated task), score in display units
    (``units``: task -> unit of :func:`display_score`; ``points`` for a task it lacks), beside the
    direction of the evaluated task's metric (``directions``: task -> higher_is_better, as its YAML
    or lm-eval declares it), which every delta of the report is oriented by.

    A cumulative "task" selection gives k = 0..len(heads) (cumulative top heads, k = 0 the
    baseline); any other task or unfiltered selection k = 0 and k = len(heads); the other kinds
    give their k = len(heads) rows, plus one set of k = 0 baseline rows per model and kind.
    Raises KeyError naming the (model, task, head set) of an evaluation that is missing, and
    ValueError naming an evaluated task without a boolean direction.
    """
    capabilities, units = capabilities or {}, units or {}
    for task in dict.fromkeys(e["task"] for e in evals):
        if not isinstance(directions.get(task), bool):
            raise ValueError(f"task {task}: its metric's direction (higher_is_better) is "
                             f"{directions.get(task, 'missing')!r}; expected True or False for every evaluated task")
    values = {(e["model"], e["task"], e["headset"]): e["value"] for e in evals}
    eval_tasks: dict[str, list[str]] = {}
    for e in evals:
        eval_tasks.setdefault(e["model"], []).append(e["task"])
    rows, baselines_done = [], set()

    def add(selection, k, heads):
        model, headset = selection["model"], format_headset(heads)
        for eval_task in dict.fromkeys(eval_tasks.get(model, [])):
            if (model, eval_task, headset) not in values:
                raise KeyError(f"no evaluation of model {model}, task {eval_task}, heads {headset}")
            baseline = values[(model, eval_task, "none")]
            rows.append({
                "model": model, "kind": selection["kind"], "task": selection["task"],
                "capability": capabilities.get(selection["task"], selection["task"]),
                "method": selection["method"], "search": selection["search"], "k": k,
                "headset": headset, "eval_task": eval_task,
                "eval_capability": capabilities.get(eval_task, eval_task),
                "score": _shown(eval_task, values[(model, eval_task, headset)], baseline, units),
                "higher_is_better": directions[eval_task],
            })

    for selection in chosen:
        heads = selection["heads"]
        if selection["kind"] in ("task", "unfiltered"):
            ks = range(len(heads) + 1) if selection.get("cumulative", True) else sorted({0, len(heads)})
            for k in ks:
                add(selection, k, heads[:k])
            continue
        key = (selection["model"], selection["kind"])
        if key not in baselines_done:
            baselines_done.add(key)
            add(selection, 0, [])
        add(selection, len(heads), heads)
    return pd.DataFrame(rows, columns=EVALS_FRAME_COLUMNS)


def _shown(task: str, value: float, baseline: float, units: Mapping[str, str]) -> float:
    try:
        return display_score(value, baseline, units.get(task, "points"))
    except ValueError as error:
        raise ValueError(f"task {task}: {error}") from None
