"""Every search's per-head values in formats other tools read: a tidy CSV and MIB's node format.

Both read ``recovery.json`` records (``scripts/recover_heads.py``, :class:`headloc.api.Located`) and
nothing else, so a search exported from the workflow and the same search found by
:func:`headloc.locate` give the same rows.

**Tidy CSV** (:func:`tidy_frame`): one row per search and head, columns :data:`TIDY_COLUMNS`:
``head`` is headloc's name (``L1H2``), ``layer`` and ``index`` its layer and its index in the layer,
``value`` the record's ``coef`` (what it means is the method's ``label``; empty where the method
measured nothing, e.g. the random baseline) and ``rank`` its place in the record's ``ranking``
(1 = the most important head).

**MIB node format** (:func:`mib_graph`): the circuit-localization track of MIB (Mueller et al.,
2025) reads circuits as EAP-IG ``Graph`` JSON files. headloc writes the node-score version of
``Graph.to_json`` (EAP-IG's ``eap/graph.py`` after the MIB release: ``{"cfg": ..., "nodes":
{name: {"in_graph": bool, "score": float}}, "edges": {...}}``), one importance file per model and
task in a folder named ``<task>_<model>`` (the MIB submission layout, README of the MIB circuit
track, "Submitting to the MIB Leaderboard"). The mapping is in :func:`mib_graph` and docs/library.md.

>>> record = {"model": "m", "task": "t", "search": "s", "method": "greedy1s", "n_layers": 1,
...           "n_heads": 2, "ranking": ["L0H1", "L0H0"], "top_heads": ["L0H1"],
...           "coef": {"L0H0": 0.1, "L0H1": -0.5}}
>>> tidy_frame([record])[["head", "layer", "index", "value", "rank"]].values.tolist()
[['L0H0', 0, 0, 0.1, 2], ['L0H1', 0, 1, -0.5, 1]]
>>> {name: node["score"] for name, node in mib_graph(record)["nodes"].items() if name.startswith("a")}
{'a0.h0': -0.1, 'a0.h1': 0.5}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from headloc.heads import parse_head
from headloc.io import write_text

TIDY_COLUMNS = ("model", "task", "search", "head", "layer", "index", "value", "rank")
# Which format the MIB files follow: EAP-IG's Graph.to_json with node scores (see the module doc).
MIB_FORMAT = "EAP-IG Graph.to_json, node scores (MIB circuit-localization track, 2025)"
MIB_FILE = "importances.json"


def _value(value) -> float:
    return math.nan if value is None else float(value) + 0.0  # + 0.0: the Lasso's -0.0 reads as 0.0


def tidy_frame(records: Iterable[Mapping]):
    """One row per (search, head) of ``records`` (``recovery.json`` dicts), heads in layer order."""
    import pandas as pd

    rows = []
    for record in records:
        rank = {head: i + 1 for i, head in enumerate(record["ranking"])}
        for head, value in record["coef"].items():
            layer, index = parse_head(head)
            rows.append((record["model"], record["task"], record["search"], head, layer, index,
                         _value(value), rank.get(head)))
    frame = pd.DataFrame(rows, columns=list(TIDY_COLUMNS))
    return frame.sort_values(["model", "task", "search", "layer", "index"], kind="stable", ignore_index=True)


def importance_sign(record: Mapping) -> int:
    """+1 or -1: the sign that makes the record's first-ranked head score highest.

    A method ranks by its own direction (a score change when ablated: most negative first; CHG's
    gates: largest first); MIB ranks nodes by score, highest first. Read off the ranking itself,
    so that it follows whatever direction the method ranked in.
    """
    measured = [_value(record["coef"][h]) for h in record["ranking"] if record["coef"].get(h) is not None]
    return -1 if len(measured) > 1 and measured[0] < measured[-1] else 1


def mib_node_name(head: str) -> str:
    """headloc's ``L3H7`` as MIB's (EAP-IG's) attention node ``a3.h7``."""
    layer, index = parse_head(head)
    return f"a{layer}.h{index}"


def mib_graph(record: Mapping) -> dict:
    """One search as an EAP-IG/MIB node-level graph.

    - ``a{layer}.h{head}``: ``score`` = the head's value times :func:`importance_sign` (higher =
      more important, in the order of the record's ``ranking``; for the score-change methods minus
      the change, i.e. the drop when the head is ablated); NaN where the method measured nothing
      (EAP-IG's "not scored"). ``in_graph``: the head is in the record's top heads.
    - ``input``, ``m{layer}``, ``logits``: headloc never ablates them, so they stay in the graph
      with score NaN ("not scored").
    - ``edges``: none (headloc localizes nodes, not edges).
    """
    sign = importance_sign(record)
    top = set(record.get("top_heads", record["ranking"][:1]))
    n_layers, n_heads = int(record["n_layers"]), int(record["n_heads"])
    nodes = {"input": {"in_graph": True, "score": math.nan}}
    for layer in range(n_layers):
        for index in range(n_heads):
            head = f"L{layer}H{index}"
            value = record["coef"].get(head)
            nodes[f"a{layer}.h{index}"] = {"in_graph": head in top,
                                           "score": _value(None if value is None else sign * float(value))}
        nodes[f"m{layer}"] = {"in_graph": True, "score": math.nan}
    nodes["logits"] = {"in_graph": True, "score": math.nan}
    cfg = {"n_layers": n_layers, "n_heads": n_heads, "parallel_attn_mlp": False}
    return {"cfg": cfg, "nodes": nodes, "edges": {}}


def _slug(text: str) -> str:
    """A folder-safe name: a hub id's ``org/name`` becomes ``org-name``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "model"


def mib_path(folder, record: Mapping) -> Path:
    """Where a search's MIB file goes: ``folder/<search>/<task>_<model>/importances.json`` (one MIB
    submission folder per search, one ``<task>_<model>`` folder in it per model and task)."""
    return Path(folder) / _slug(record["search"]) / f"{_slug(record['task'])}_{_slug(record['model'])}" / MIB_FILE


def write_mib(folder, records: Iterable[Mapping]) -> list[Path]:
    """Write every record's MIB graph under ``folder`` (:func:`mib_path`); the paths written."""
    written = []
    for record in records:
        path = mib_path(folder, record)
        if path in written:
            raise ValueError(f"two searches export to {path}: the same model, task and search id twice")
        write_text(path, json.dumps(mib_graph(record)))
        written.append(path)
    return written


def write_tidy(path, records: Iterable[Mapping]) -> None:
    """The tidy CSV of every record (:func:`tidy_frame`), written atomically."""
    write_text(path, tidy_frame(records).to_csv(index=False))
