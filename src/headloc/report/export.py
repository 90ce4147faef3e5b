"""Every search's per-head values in formats other tools read: a tidy CSV and a submission to MIB.

Both read ``recovery.json`` records (``scripts/recover_heads.py``, :class:`headloc.api.Located`) and
nothing else, so a search exported from the workflow and the same search found by
:func:`headloc.locate` give the same rows.

**Tidy CSV** (:func:`tidy_frame`): one row per search and head, columns :data:`TIDY_COLUMNS`:
``head`` is headloc's name (``L1H2``), ``layer`` and ``index`` its layer and its index in the layer,
``value`` the record's ``coef`` (what it means is the method's ``label``; empty where the method
measured nothing, e.g. the random baseline) and ``rank`` its place in the record's ``ranking``
(1 = the most important head).

**MIB submission** (:func:`write_submission`): the circuit-localization track of MIB (Mueller et
al., 2025) reads importance scores as EAP-IG ``Graph`` JSON files (``Graph.from_json`` of
hannamw/EAP-IG, ``eap/graph.py``), one ``importances.json`` in a folder ``<task>_<model>`` per task
and model, all in one directory (the README of hannamw/MIB-circuit-track, "Submitting to the MIB
Leaderboard"). MIB keeps the top n % of the scored nodes, highest score first (signed scores for
CPR, absolute ones for CMD), and every unscored (NaN) node. So each head's score is its place in
headloc's ranking (:func:`mib_scores`): positive and strictly decreasing, the top n of MIB are
headloc's top n at any n, whichever order MIB reads. The MLPs are not scored (NaN): MIB keeps them in
every circuit. docs/library.md, "Exports", has the whole mapping.

>>> record = {"model": "m", "task": "t", "search": "s", "method": "greedy1s", "n_layers": 1,
...           "n_heads": 2, "ranking": ["L0H1", "L0H0"], "top_heads": ["L0H1"],
...           "coef": {"L0H0": 0.1, "L0H1": -0.5}}
>>> tidy_frame([record])[["head", "layer", "index", "value", "rank"]].values.tolist()
[['L0H0', 0, 0, 0.1, 2], ['L0H1', 0, 1, -0.5, 1]]
>>> cfg = {"n_layers": 1, "n_heads": 2, "d_model": 8, "parallel_attn_mlp": False}
>>> {name: node["score"] for name, node in mib_graph(record, cfg)["nodes"].items() if name.startswith("a")}
{'a0.h0': 0.5, 'a0.h1': 1.0}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from headloc.heads import HeadGeometry, parse_head
from headloc.io import write_text

TIDY_COLUMNS = ("model", "task", "search", "head", "layer", "index", "value", "rank", "status", "low", "high",
                "p_top_k", "found")
# Which format the MIB files follow (see the module doc).
MIB_FORMAT = "EAP-IG Graph.from_json, node scores (MIB circuit-localization track)"
MIB_FILE = "importances.json"
MIB_IDS = "headloc.tsv"  # the submission's sidecar: which headloc search each folder holds
MIB_ID_COLUMNS = ("folder", "model", "task", "search", "method", "measured", "estimated", "unmeasured",
                  "universal_ranked_down", "mib_skips")
# The names MIB's circuit track gives its tasks and models in a submission's folders
# (MIB_circuit_track/utils.py of hannamw/MIB-circuit-track: COL_MAPPING; tasks spelled with '-').
MIB_TASKS = ("ioi", "mcqa", "arithmetic-addition", "arithmetic-subtraction", "arc-easy", "arc-challenge")
MIB_MODELS = ("gpt2", "qwen2.5", "gemma2", "llama3", "interpbench")
# Architectures whose blocks feed attention and MLP the same input (EAP-IG's parallel_attn_mlp),
# read off transformers' decoder layers: always, or when one of its config's flags is set.
PARALLEL_TYPES = frozenset({"gptj", "codegen", "phi", "cohere", "cohere2", "cohere2_moe"})
PARALLEL_FLAGS = {"gpt_neox": ("use_parallel_residual",), "stablelm": ("use_parallel_residual",),
                  "falcon": ("parallel_attn", "new_decoder_architecture")}


def _value(value) -> float:
    return math.nan if value is None else float(value) + 0.0  # + 0.0: the Lasso's -0.0 reads as 0.0


def tidy_frame(records: Iterable[Mapping]):
    """One row per (search, head) of ``records`` (``recovery.json`` dicts), heads in layer order."""
    import pandas as pd

    rows = []
    for record in records:
        rank = {head: i + 1 for i, head in enumerate(record["ranking"])}
        status, intervals = record.get("status") or {}, record.get("interval") or {}
        p_top_k, found = record.get("p_top_k") or {}, record.get("found")
        for head, value in record["coef"].items():
            layer, index = parse_head(head)
            low, high = intervals.get(head) or (None, None)
            rows.append((record["model"], record["task"], record["search"], head, layer, index,
                         _value(value), rank.get(head), status.get(head, ""), _value(low), _value(high),
                         _value(p_top_k.get(head)), None if found is None else head in found))
    frame = pd.DataFrame(rows, columns=list(TIDY_COLUMNS))
    return frame.sort_values(["model", "task", "search", "layer", "index"], kind="stable", ignore_index=True)


def write_tidy(path, records: Iterable[Mapping]) -> None:
    """The tidy CSV of every record (:func:`tidy_frame`), written atomically."""
    write_text(path, tidy_frame(records).to_csv(index=False))


# ------------------------------------------------------------------ MIB


def parallel_attn_mlp(config) -> bool:
    """Whether a model's attention and MLP read the same input (a transformers text config)."""
    model_type = getattr(config, "model_type", None)
    if model_type in PARALLEL_TYPES:
        return True
    return any(bool(getattr(config, flag)) for flag in PARALLEL_FLAGS.get(model_type, ()))


def mib_cfg(config) -> dict:
    """The ``cfg`` of a model's EAP-IG graph: every key ``Graph.from_model`` reads (layers, heads per
    layer, hidden size, parallel attention and MLP), from its transformers config."""
    text = getattr(config, "get_text_config", lambda: config)()
    geometry = HeadGeometry.of(text)
    return {"n_layers": geometry.n_layers, "n_heads": geometry.n_heads, "d_model": int(text.hidden_size),
            "parallel_attn_mlp": parallel_attn_mlp(text)}


def mib_node_name(head: str) -> str:
    """headloc's ``L3H7`` as MIB's (EAP-IG's) attention node ``a3.h7``."""
    layer, index = parse_head(head)
    return f"a{layer}.h{index}"


def exported_ranking(record: Mapping, universal: Iterable[str] = ()) -> list[str]:
    """The order a search is exported in: its ranking with the ``universal`` heads after the other
    measured or estimated heads (so that the top k is the one Table 2 validates when the universal
    filter is on), and the heads it never measured last (``status`` in recovery.json)."""
    status, universal = record.get("status") or {}, set(universal)
    unmeasured = [h for h in record["ranking"] if status.get(h) == "unmeasured"]
    kept = [h for h in record["ranking"] if status.get(h) != "unmeasured"]
    return [h for h in kept if h not in universal] + [h for h in kept if h in universal] + unmeasured


def mib_scores(record: Mapping, universal: Iterable[str] = ()) -> dict[str, float]:
    """Each head's MIB score from its place in :func:`exported_ranking`: ``(N - i) / N`` for the i-th
    (from 0) of N heads, so 1 for the first and 1/N for the last; every head the search never
    measured (``status`` unmeasured) ties below them all, at ``1 / (2 N)``.

    The ranking is the method's own order, whichever way its values point (a score change: most
    negative first; CHG's gates: largest first; greedy's rounds, then the universal heads it left
    out; a random draw), so the order is taken from it and never from the values, which tie (a
    Lasso's zeros) or disagree with it. Distinct in float32 (EAP-IG's tensors) for any model."""
    ranking, names = list(record["ranking"]), HeadGeometry(int(record["n_layers"]), int(record["n_heads"])).names
    if sorted(ranking, key=parse_head) != names:
        raise ValueError(f"search {record.get('search')!r} ranks {len(ranking)} heads ({len(set(ranking))} distinct), "
                         f"expected each of the model's {len(names)} heads once")
    status, n = record.get("status") or {}, len(ranking)
    return {head: 1 / (2 * n) if status.get(head) == "unmeasured" else (n - i) / n
            for i, head in enumerate(exported_ranking(record, universal))}


def mib_graph(record: Mapping, cfg: Mapping, universal: Iterable[str] = ()) -> dict:
    """One search as the EAP-IG graph MIB reads, for a model whose graph ``cfg`` is :func:`mib_cfg`'s.

    - ``a{layer}.h{head}``: ``score`` from :func:`mib_scores` (``universal`` heads after the others);
      ``in_graph`` for the first k of :func:`exported_ranking`, k the record's number of top heads.
    - ``input``, ``m{layer}``, ``logits``: never ablated by headloc, so not scored (NaN) and in the
      graph; MIB keeps unscored nodes in every circuit.
    - ``edges``: none (headloc scores nodes).
    """
    geometry = (int(record["n_layers"]), int(record["n_heads"]))
    if (cfg.get("n_layers"), cfg.get("n_heads")) != geometry:
        raise ValueError(f"search {record.get('search')!r} is of a model of {geometry[0]} layers x {geometry[1]} "
                         f"heads, but its model's config says {cfg.get('n_layers')} x {cfg.get('n_heads')}")
    scores = mib_scores(record, universal)
    top = set(exported_ranking(record, universal)[: len(record["top_heads"])])
    unscored = {"in_graph": True, "score": math.nan}
    nodes = {"input": dict(unscored)}
    for layer in range(geometry[0]):
        for index in range(geometry[1]):
            head = f"L{layer}H{index}"
            nodes[mib_node_name(head)] = {"in_graph": head in top, "score": scores[head]}
        nodes[f"m{layer}"] = dict(unscored)
    nodes["logits"] = dict(unscored)
    return {"cfg": dict(cfg), "nodes": nodes, "edges": {}}


def mib_name(headloc_id: str, names: Mapping | None, valid: tuple[str, ...], what: str) -> str:
    """MIB's name of a headloc task or model id: the one ``names`` maps it to (one of ``valid``),
    else the id itself with ``_`` as ``-`` (MIB splits ``<task>_<model>`` at its one ``_``)."""
    if headloc_id in (names or {}):
        name = names[headloc_id]
        if name not in valid:
            raise ValueError(f"MIB {what} name {name!r} (for {headloc_id!r}) is not one of MIB's: {', '.join(valid)}")
        return name
    return re.sub(r"[^A-Za-z0-9.-]+", "-", str(headloc_id)).strip("-") or what


def mib_folder(record: Mapping, tasks: Mapping | None = None, models: Mapping | None = None) -> str:
    """The submission folder of a search: ``<task>_<model>`` in MIB's names (:func:`mib_name`)."""
    task = mib_name(record["task"], tasks, MIB_TASKS, "task")
    return f"{task}_{mib_name(record['model'], models, MIB_MODELS, 'model')}"


def mib_skips(name: str) -> str:
    """Why MIB's evaluation would skip a submission folder ``<task>_<model>`` (its task or model is
    not one of MIB's lists), or empty when it would read it."""
    task, _, model = name.partition("_")
    outside = []
    if task not in MIB_TASKS:
        outside.append(f"task {task!r}")
    if model not in MIB_MODELS:
        outside.append(f"model {model!r}")
    return "" if not outside else f"{' and '.join(outside)} not in MIB's lists: MIB's evaluation skips this folder"


def write_submission(folder, records: Iterable[Mapping], cfgs: Mapping, *, tasks: Mapping | None = None,
                     models: Mapping | None = None, universal: Mapping | None = None, log=None) -> list[Path]:
    """One MIB submission under ``folder``: ``<task>_<model>/importances.json`` for each record
    (:func:`mib_graph`; ``cfgs``: model id -> :func:`mib_cfg`; ``universal``: model id -> the
    universal heads the tables filter, ranked after the others), named as :func:`mib_folder` with
    ``tasks`` and ``models`` (headloc id -> MIB name), and the sidecar ``headloc.tsv``, one row a
    folder: the headloc model, task, search and method it holds, how many heads it measured,
    estimated and never measured, the universal heads ranked down, and whether MIB would skip it
    (:func:`mib_skips`, also logged to ``log``). Returns the importance files."""
    import pandas as pd

    folder, rows, written, universal = Path(folder), {}, [], universal or {}
    for record in records:
        name = mib_folder(record, tasks, models)
        status = list((record.get("status") or {}).values())
        skipped = mib_skips(name)
        if skipped and log is not None:
            log.warning("%s: %s", name, skipped)
        ids = (record["model"], record["task"], record["search"], record["method"],
               *(status.count(kind) for kind in ("measured", "estimated", "unmeasured")),
               ",".join(h for h in universal.get(record["model"], ()) if h in record["coef"]), skipped)
        if name in rows:
            raise ValueError(f"searches {rows[name][2]!r} (task {rows[name][1]!r}) and {ids[2]!r} (task {ids[1]!r}) "
                             f"both export to {folder / name}: a submission holds one search per task and model")
        if record["model"] not in cfgs:
            raise ValueError(f"no graph config for model {record['model']!r}; configs given for: {', '.join(cfgs)}")
        path = folder / name / MIB_FILE
        write_text(path, json.dumps(mib_graph(record, cfgs[record["model"]], universal.get(record["model"], ()))))
        rows[name], written = ids, [*written, path]
    frame = pd.DataFrame([(name, *ids) for name, ids in rows.items()], columns=list(MIB_ID_COLUMNS))
    write_text(folder / MIB_IDS, frame.to_csv(sep="\t", index=False))
    return written
