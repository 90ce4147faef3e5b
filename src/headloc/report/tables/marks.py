"""Heads a search did not confirm, and each shown head's evidence, marked on the tables that list or
validate a search's top heads (2, 3, 4, 9, 10)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from headloc.report.labels import search_labels
from headloc.report.spec import TableSpec
from headloc.report.tables.registry import head_list


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
    found = {(r.model, r.task, r.search): head_list(r.unconfirmed) for r in recoveries.itertuples(index=False)}
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
                                  for head in head_list(heads)) for key, heads in zip(keys, out["heads"])]
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
    heads = head_list(found)
    return f"{len(heads)} of {len(head_list(row.top_heads)[:k])}" if heads else "none"


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
# the tables that list or validate a search's top heads, each with the collected recoveries it reads
MARKED = {"table2": "recoveries_main", "table3": "recoveries_main", "table4": "recoveries",
          "table9": "recoveries", "table10": "recoveries_main"}


def marked(spec: TableSpec) -> TableSpec:
    """``spec``, its heads marked where it lists or validates a search's top heads."""
    return _marking(spec, MARKED[spec.name]) if spec.name in MARKED else spec
