"""A search's ranking scored against a planted model's measured truth (benchmarks/ground_truth.py).

Per task (:func:`task_truth`, from its truth.json entry) every planted head is of one kind:

- the **universal** head;
- **roles**: the role heads that act alone (a copy role's head, a backup's primary): the singles;
- the redundant **pair** of the certified design (two identical heads);
- an interaction's (:data:`KINDS`): a **backup** head (it matters only once its primary is
  ablated), a **redundant** pair's two heads (each alone does nothing), a **synergy** pair's two
  (each alone breaks the task).

A search's top k (:func:`found`) has a slot for every planted head of the task (k = its planted
heads), so that no kind caps another. ``recall`` is the share of the singles in the top k, and
``recall_<kind>`` the share of each interaction kind's heads; the universal head and the pair are
found or not. :func:`summarise` pools them per size, method and budget over certified tasks (a
task whose certificate or any of its interactions' fails is left out), placements and seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from headloc import methods

KINDS = ("backup", "redundant", "synergy")  # the interaction kinds scored on their own
GOAL_RECALL, GOAL_ALL_FOUND = 0.95, 0.9


def task_truth(entry: dict) -> dict:
    """A task's heads to find, by kind, k, and whether the task is certified (see the module docstring)."""
    planted = entry["planted"]
    pair = entry.get("pair", {}).get("heads", [])
    universal = [h for h, p in planted.items() if p["role"] == "universal"]
    interactions = entry.get("interactions", [])
    by_kind: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for interaction in interactions:  # a backup's primary acts alone: it is a single
        heads = interaction["heads"]
        by_kind[interaction["kind"]] += heads[1:] if interaction["kind"] == "backup" else heads
    grouped = {*universal, *pair, *(h for heads in by_kind.values() for h in heads)}
    certificate = entry.get("certificate", {})
    return {"roles": [h for h in planted if h not in grouped], "universal": universal, "pair": pair, **by_kind,
            "k": len(planted), "certified": bool(certificate.get("passes")) and all(i["passes"] for i in interactions),
            "weakest": certificate.get("weakest")}


def found(top: list[str], truth: dict) -> dict:
    """What a top k (head names) finds of a task's truth: the recall of its singles and of each
    interaction kind's heads (NaN where the task has none), the universal head and the pair (NaN
    where the task has none)."""
    top = set(top)

    def share(heads):
        return len(top & set(heads)) / len(heads) if heads else np.nan

    def all_in(heads):  # NaN for a task without such heads: "found" would be vacuous
        return set(heads) <= top if heads else np.nan

    return {"recall": share(truth["roles"]), "universal_found": all_in(truth["universal"]),
            "pair_found": all_in(truth["pair"]),
            **{f"recall_{kind}": share(truth[kind]) for kind in KINDS}}


def _mean_and_all(values: pd.Series) -> tuple[float, float]:
    """Mean recall and P(recall = 1) over the runs that have the kind at all."""
    values = values.dropna()
    return (values.mean(), (values == 1).mean()) if len(values) else (np.nan, np.nan)


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Per (size, method, budget), over certified tasks x placements x seeds: mean recall of the singles
    and its standard error, P(recall = 1), universal head and pair found, each interaction kind's mean
    recall and P(recall = 1), evaluations, ratio to greedy's on the same task."""
    table = table.reindex(columns=[*table.columns, *(f"recall_{k}" for k in KINDS if f"recall_{k}" not in table)])
    table = table[table["certified"].astype(bool)].assign(budget=table["budget"].fillna(-1))
    greedy = (table[table["method"] == methods.REFERENCE].groupby(["model", "task"])["n_evals"].mean()
              .rename("greedy_evals"))
    table = table.join(greedy, on=["model", "task"])
    rows = []
    for (size, n, method, budget), group in table.groupby(["size", "n_heads", "method", "budget"]):
        scored = group.dropna(subset=["recall"])
        pairs = group.dropna(subset=["pair_found"])
        kinds = {}
        for kind in KINDS:
            kinds[f"recall_{kind}"], kinds[f"p_all_{kind}"] = _mean_and_all(group[f"recall_{kind}"])
        rows.append({
            "size": size, "n_heads": n, "method": method, "budget": None if budget < 0 else int(budget),
            "runs": len(scored), "placements": group["model"].nunique(),
            "recall": scored["recall"].mean(), "se": scored["recall"].std(ddof=1) / math.sqrt(len(scored))
            if len(scored) > 1 else np.nan,
            "p_all_found": (scored["recall"] == 1).mean(),
            "universal_found": group["universal_found"].mean(),
            "pair_found": pairs["pair_found"].astype(float).mean() if len(pairs) else np.nan,
            **kinds,
            "n_evals": group["n_evals"].mean(),
            "ratio_to_greedy": (group["n_evals"] / group["greedy_evals"]).mean(),
            "seconds": group["seconds"].mean(),
        })
    return pd.DataFrame(rows)


def goal_cells(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (size, method), the cheapest budget whose mean recall >= GOAL_RECALL and P(recall = 1) >= GOAL_ALL_FOUND."""
    met = summary[(summary["recall"] >= GOAL_RECALL) & (summary["p_all_found"] >= GOAL_ALL_FOUND)]
    return met.sort_values("n_evals").groupby(["size", "method"], as_index=False).first()


def budget_fit(table: pd.DataFrame) -> pd.DataFrame:
    """Per (size, task, method that spends a budget), the mean evaluations of the smallest budget whose
    mean recall over placements x seeds reached GOAL_RECALL, and that over k ln(N / k): the data of
    the budget advice (headloc.search.budget)."""
    data = table[table["certified"].astype(bool) & table["budget"].notna()].dropna(subset=["recall"])
    cells = data.groupby(["size", "n_heads", "task", "method", "budget"], as_index=False).agg(
        recall=("recall", "mean"), k=("k", "first"), n_evals=("n_evals", "mean"))
    rows = []
    for (size, n, task, method), group in cells.groupby(["size", "n_heads", "task", "method"]):
        hit = group[group["recall"] >= GOAL_RECALL].sort_values("budget")
        k = int(group["k"].iloc[0])
        masks = float(hit["n_evals"].iloc[0]) if len(hit) else float("nan")  # what it spent (a search may stop early)
        rows.append({"size": size, "n_heads": n, "task": task, "method": method, "k": k, "masks_at_goal": masks,
                     "per_k_log_n": masks / (k * math.log(n / k))})
    return pd.DataFrame(rows)
