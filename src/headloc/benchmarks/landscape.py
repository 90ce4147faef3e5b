"""Greedy's question, measured whole: every head's drop beside a background of heads, and how well
the drops of random groups point at the best head (benchmarks/conditional_landscape.py).

Conditional group testing answers "which head hurts most on top of the heads already chosen" by
halving the group whose ablation, beside the background, lowers the score most. That finds the
best head only if its group is the one that drops most. This measures whether it is, on a real
model, without any search's choices in the way: the score with the background ablated, every
other head ablated beside it (greedy's round: its best head is the one greedy picks), and
``partitions`` random partitions of those heads into groups of each size, each group ablated
beside the background. :func:`summarise` reads off the best head and the runner-up, how many
heads raise the score when ablated (their drops are negative, and in a group they cancel
others'), and for each partition the rank of the best head's group among the groups' drops
(0: the group a halving search would follow) and how closely the groups' drops follow the sum of
their heads' drops (additivity) and the largest of them.

A record is written per task and seed (``<out>/<task>-s<seed>.json``, written whole through a
temporary file); a rerun skips what is there. :func:`landscape_table` prints them.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np

from headloc.heads import head_name

GROUP_SIZES = (16, 8, 4)


def partition(heads: list[int], size: int, seed: int, rep: int) -> list[list[int]]:
    """``heads`` shuffled (seeded by ``seed``, ``size``, ``rep``) and cut into ceil(n / size) near-equal groups."""
    order = np.random.default_rng([seed, size, rep]).permutation(heads)
    return [[int(h) for h in part] for part in np.array_split(order, -(-len(heads) // size))]


def measure(score_sets: Callable[[list], list], geometry, background: list[int], *,
            group_sizes=GROUP_SIZES, partitions: int = 2, seed: int = 0) -> dict:
    """The record: ``score_sets(head_sets) -> scores`` (higher is better) scores each set of
    heads (flat indices of ``geometry``, a :class:`headloc.heads.HeadGeometry`) ablated;
    ``background`` is ablated under every set. Costs ``1 + (n - b)`` evaluations and each
    partition's groups."""
    n_heads = geometry.total
    background = [int(h) for h in background]
    others = [h for h in range(n_heads) if h not in background]
    base, *singles = score_sets([background] + [background + [h] for h in others])
    record = {"n_layers": geometry.n_layers, "n_heads": geometry.n_heads, "background": background, "seed": seed, "base": float(base),
              "drops": {str(h): float(base - s) for h, s in zip(others, singles)}, "partitions": []}
    for size in group_sizes:
        for rep in range(partitions):
            groups = partition(others, size, seed, rep)
            scores = score_sets([background + group for group in groups])
            record["partitions"].append({"group_size": size, "rep": rep, "groups": groups,
                                         "drops": [float(base - s) for s in scores]})
    return record


def check_kept(record: dict, background: list[int], group_sizes, partitions: int) -> None:
    """Refuse a record kept from a run that measured something else than is asked now (a rerun
    into the same folder would otherwise skip it and report the other measurement)."""
    kept = {"background": record["background"], "group sizes": sorted({p["group_size"] for p in record["partitions"]}),
            "partitions": max((p["rep"] + 1 for p in record["partitions"]), default=0)}
    asked = {"background": [int(h) for h in background], "group sizes": sorted(group_sizes), "partitions": partitions}
    differ = [f"{key} {kept[key]} (asked: {asked[key]})" for key in kept if kept[key] != asked[key]]
    if differ:
        raise ValueError(f"the record kept there measured {', '.join(differ)}; give another --out or delete it")


def summarise(record: dict) -> dict:
    """What the record says (module docstring): ``best``/``runner_up`` (head, drop), ``raising``
    (heads whose ablation raises the score) and ``raised`` (the sum of their drops), ``lowered``
    (the sum of the positive drops), and per partition the best head's group's ``rank`` (groups
    with a larger drop), ``additive`` and ``largest`` (correlations of the groups' drops with the
    sum and the largest of their heads' drops)."""
    drops = {int(h): d for h, d in record["drops"].items()}
    (best, top), (second, runner) = sorted(drops.items(), key=lambda item: (-item[1], item[0]))[:2]
    values = np.array(list(drops.values()))
    parts = []
    for part in record["partitions"]:
        group_drops = np.array(part["drops"])
        holder = next(i for i, group in enumerate(part["groups"]) if best in group)
        sums = np.array([sum(drops[h] for h in group) for group in part["groups"]])
        largest = np.array([max(drops[h] for h in group) for group in part["groups"]])
        parts.append({"group_size": part["group_size"], "rep": part["rep"], "groups": len(group_drops),
                      "rank": int((group_drops > group_drops[holder]).sum()),
                      "additive": _correlation(group_drops, sums), "largest": _correlation(group_drops, largest)})
    return {"best": (best, top), "runner_up": (second, runner), "raising": int((values < 0).sum()),
            "raised": float(values[values < 0].sum()), "lowered": float(values[values > 0].sum()), "partitions": parts}


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1]) if len(x) > 1 and x.std() > 0 and y.std() > 0 else float("nan")


def write_record(path: Path, record: dict) -> None:
    """Written whole or not at all: a killed run leaves no half record to skip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(record))
    os.replace(part, path)


def read_records(folders) -> list[dict]:
    """Every record under ``folders``, with its task (from the file name ``<task>-s<seed>.json``)."""
    return [{"task": path.stem.rsplit("-s", 1)[0], **json.loads(path.read_text())}
            for folder in folders for path in sorted(Path(folder).glob("*-s*.json"))]


def landscape_table(records: list[dict]) -> str:
    """One row per task and seed: the best head and the
    runner-up with their drops, heads raising and lowering the score, and per group size the best
    head's group's rank in each partition with the mean correlations."""
    sizes = sorted({part["group_size"] for record in records for part in record["partitions"]}, reverse=True)
    head = ["task", "seed", "background", "best (drop)", "runner-up", "heads raising (sum)", "sum of drops > 0",
            *(f"g = {size}: rank of its group; r(sum), r(max)" for size in sizes)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for record in records:
        found = summarise(record)
        name = partial(head_name, n_heads=record["n_heads"])
        (best, top), (second, runner) = found["best"], found["runner_up"]
        cells = [record["task"], str(record["seed"]), " ".join(name(h) for h in record["background"]) or "-",
                 f"{name(best)} ({top:.2f})", f"{name(second)} ({runner:.2f})",
                 f"{found['raising']} ({found['raised']:.1f})", f"{found['lowered']:.1f}"]
        for size in sizes:
            parts = [p for p in found["partitions"] if p["group_size"] == size]
            ranks = ", ".join(f"{p['rank']}/{p['groups']}" for p in parts)
            cells.append(f"{ranks}; {np.nanmean([p['additive'] for p in parts]):.2f}, "
                         f"{np.nanmean([p['largest'] for p in parts]):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def identification_task(task: dict, ids: list[int], data: dict, *, gold: bool = False):
    """A config task on the documents ``ids`` of its data ``data`` (as
    :func:`headloc.benchmarks.vs_greedy.identification_documents` gives them): its continuous score
    (``id_task`` and ``id_metric`` where it has them), or with ``gold`` its ``lm_eval_task``
    (whose gold continuations attribution differentiates)."""
    from headloc.api.tasks import resolve_task

    if gold:
        return resolve_task(task["lm_eval_task"], documents=ids, dataset_kwargs=data)
    return resolve_task(task.get("id_task") or task["lm_eval_task"], metric=task.get("id_metric"), documents=ids,
                        dataset_kwargs=data)


def task_scorer(model, tokenizer, task, *, batch_size: int = 128, masks_per_pass: int = 8) -> Callable[[list], list]:
    """``score_sets`` for a resolved task (:func:`headloc.api.tasks.resolve_task`) on ``model``,
    oriented by the task's declared direction so that higher is better."""
    from headloc.api.tasks import mask_scorer
    from headloc.heads import HeadGeometry
    from headloc.io import oriented

    score = mask_scorer(task, model, tokenizer, batch_size=batch_size, masks_per_pass=masks_per_pass, progress=True)
    total = HeadGeometry.of(model.config).total

    def score_sets(head_sets: list) -> list:
        masks = np.zeros((len(head_sets), total), dtype=np.int8)
        for row, heads in zip(masks, head_sets):
            row[list(heads)] = 1
        return [oriented(float(s), task.higher_is_better) for s in score(masks, desc=f"{len(head_sets)} sets")]

    return score_sets


def measure_seed(path: Path, model, tokenizer, config: dict, task: str, seed: int, background: list[int], *,
                 group_sizes, partitions: int, batch_size: int) -> dict | None:
    """One seed of benchmarks/conditional_landscape.py: the landscape of ``task`` (of ``config``,
    config/demo.yaml) beside ``background`` on the seed's identification documents, written to
    ``path``; None where ``path`` holds it already (ValueError where it holds another question's)."""
    from headloc.benchmarks.vs_greedy import identification_documents
    from headloc.heads import HeadGeometry

    if path.exists():
        check_kept(json.loads(path.read_text()), background, group_sizes, partitions)
        return None
    ids, data, _ = identification_documents(config["tasks"][task], config["search"], seed)
    score_sets = task_scorer(model, tokenizer, identification_task(config["tasks"][task], ids, data),
                             batch_size=batch_size)
    record = measure(score_sets, HeadGeometry.of(model.config), background, group_sizes=group_sizes,
                     partitions=partitions, seed=seed)
    write_record(path, record)
    return record
