"""A reader of MIB circuit-track submissions, written from MIB's and EAP-IG's published code (not
from headloc's writer), and a check of a submission against headloc's rankings.

The tests import it (tests/ is on pytest's pythonpath); on any export folder, from the checkout:

    .venv/bin/python tests/mib_format.py results/exports/mib [results]

checks every ``<task>_<model>`` folder against the ``recovery.json`` its ``headloc.tsv`` row names
under ``results`` and exits 1 on any difference.

What it follows, read at the source:

- hannamw/EAP-IG ``src/eap/graph.py`` (7af394a, the commit hannamw/MIB-circuit-track pins, and
  the later 55a2be2): ``Graph.from_json`` builds ``Graph.from_model(cfg, neuron_level=True,
  node_scores=True)``, which reads ``cfg['n_layers']``, ``['n_heads']``, ``['parallel_attn_mlp']``
  and ``['d_model']``; its forward nodes are ``input``, then per layer ``a{l}.h0`` ..
  ``a{l}.h{n_heads-1}`` and ``m{l}``; ``logits`` closes the graph. ``from_json`` sets ``in_graph``
  of every listed node but ``logits`` (an unknown name is a KeyError), stores ``score`` in a float32
  tensor that starts as NaN (NaN = not scored), and sets each listed edge, which must exist.
- ``Graph.apply_topn(n, absolute, level='node')``: ``n`` at most the scored nodes; scores made
  absolute if asked, unscored ones -inf, ``argsort(descending=True)``; the first ``n`` and every
  unscored node are in the graph, each with all its outgoing edges; then ``prune``.
- hannamw/MIB-circuit-track: ``evaluate_area_under_curve`` (MIB_circuit_track/evaluation.py) takes
  ``int(pct * scored nodes)`` nodes at each of :data:`PERCENTAGES`; ``print_results.py`` reads CPR
  from the run with ``absolute=False`` and CMD from ``absolute=True``; ``run_evaluation.py`` reads
  ``<dir>/<task>_<model>/importances.json``, and the README ("Submitting to the MIB Leaderboard")
  wants one folder per task and model named ``<task>_<model>``.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CFG_KEYS = ("n_layers", "n_heads", "parallel_attn_mlp", "d_model")  # what Graph.from_model reads
PERCENTAGES = (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)  # evaluate_area_under_curve's
IMPORTANCES = "importances.json"


@dataclass
class Graph:
    """What ``Graph.from_json`` keeps of a node-score file: forward nodes in forward-index order,
    their ``in_graph`` flags and float32 scores (None when no node has a score)."""

    cfg: dict
    nodes: list[str]
    in_graph: np.ndarray
    scores: np.ndarray | None

    @property
    def scored(self) -> np.ndarray:
        return ~np.isnan(self.scores)

    def nodes_where(self, flags) -> set[str]:
        return {name for name, flag in zip(self.nodes, flags) if flag}


def forward_nodes(cfg: dict) -> list[str]:
    """The source nodes of ``Graph.from_model``, at their forward indices."""
    names = ["input"]
    for layer in range(cfg["n_layers"]):
        names += [f"a{layer}.h{head}" for head in range(cfg["n_heads"])] + [f"m{layer}"]
    return names


def edge_names(cfg: dict) -> set[str]:
    """Every edge ``Graph.from_model`` adds: each node of the residual stream so far to each
    head's q, k and v and to the MLP (parallel blocks: the MLP reads what the heads read), and the
    whole stream to ``logits``."""
    edges, stream = set(), ["input"]
    for layer in range(cfg["n_layers"]):
        heads, mlp = [f"a{layer}.h{head}" for head in range(cfg["n_heads"])], f"m{layer}"
        edges |= {f"{node}->{head}<{letter}>" for node in stream for head in heads for letter in "qkv"}
        readers = stream if cfg["parallel_attn_mlp"] else stream + heads
        edges |= {f"{node}->{mlp}" for node in readers}
        stream = stream + heads + [mlp]
    return edges | {f"{node}->logits" for node in stream}


def check_cfg(cfg) -> dict:
    """The cfg keys ``Graph.from_model`` reads, with the types its tensors need."""
    missing = [key for key in CFG_KEYS if key not in cfg]
    if missing:
        raise KeyError(f"cfg lacks {', '.join(missing)} (Graph.from_model reads {', '.join(CFG_KEYS)})")
    for key in ("n_layers", "n_heads", "d_model"):
        if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 1:
            raise ValueError(f"cfg {key} = {cfg[key]!r}: a positive integer is needed (a tensor size)")
    if not isinstance(cfg["parallel_attn_mlp"], bool):
        raise ValueError(f"cfg parallel_attn_mlp = {cfg['parallel_attn_mlp']!r}: true or false")
    return cfg


def read_graph(path) -> Graph:
    """A node-score file as ``Graph.from_json`` reads it (Python's json: NaN allowed)."""
    data = json.loads(Path(path).read_text())
    assert all(key in data for key in ("cfg", "nodes", "edges")), "Bad input JSON format - Missing keys"
    cfg = check_cfg(data["cfg"])
    nodes = forward_nodes(cfg)
    index = {name: i for i, name in enumerate(nodes)}
    in_graph, scores, any_score = np.zeros(len(nodes), bool), np.full(len(nodes), np.nan, np.float32), False
    for name, node in data["nodes"].items():
        if name == "logits":
            continue
        i = index[name]  # KeyError, as g.nodes[name] would raise
        in_graph[i] = node["in_graph"]
        if "score" in node:
            any_score, scores[i] = True, node["score"]
    if data["edges"]:
        unknown = sorted(set(data["edges"]) - edge_names(cfg))
        assert not unknown, f"edges not in the graph: {unknown[:3]}"
        assert all({"score", "in_graph"} <= set(edge) for edge in data["edges"].values())
    return Graph(cfg, nodes, in_graph, scores if any_score else None)


def top_n(graph: Graph, n: int, absolute: bool) -> set[str]:
    """The nodes of MIB's circuit of ``n`` scored nodes: ``apply_topn(n, absolute, level='node')``
    then ``prune``. Raises where two nodes tie at the cut (MIB's unstable argsort may take either)."""
    assert graph.scores is not None, "Node scores must be present for node-level evaluation"
    scored = graph.scored
    assert n <= scored.sum(), f"Requested n ({n}) is greater than the number of scored nodes ({scored.sum()})"
    keys = np.abs(graph.scores) if absolute else graph.scores.copy()
    keys[~scored] = -np.inf
    order = np.argsort(-keys, kind="stable")
    if 0 < n < scored.sum() and keys[order[n - 1]] == keys[order[n]]:
        raise ValueError(f"nodes {graph.nodes[order[n - 1]]} and {graph.nodes[order[n]]} tie at {keys[order[n]]} "
                         f"(absolute={absolute}): MIB's top {n} may hold either")
    chosen = np.zeros(len(graph.nodes), bool)
    chosen[order[:n]] = True
    chosen[~scored] = True
    return graph.nodes_where(prune(graph.cfg, chosen))


def prune(cfg: dict, chosen: np.ndarray) -> np.ndarray:
    """``Graph.prune`` after a node-level top n: every chosen node sends all its edges (the whole
    row, as apply_topn sets it); nodes lacking an outgoing or incoming edge go, then edges lacking
    either end, until nothing changes. The nodes left."""
    nodes = forward_nodes(cfg)
    n_heads, n_backward = cfg["n_heads"], cfg["n_layers"] * (3 * cfg["n_heads"] + 1) + 1
    to_backward = np.zeros((len(nodes), n_backward), bool)  # a forward node's own input columns
    for i, name in enumerate(nodes):
        if name.startswith("a"):
            layer, head = map(int, re.fullmatch(r"a(\d+)\.h(\d+)", name).groups())
            to_backward[i, [layer * (3 * n_heads + 1) + q * n_heads + head for q in range(3)]] = True
        elif name.startswith("m"):
            to_backward[i, int(name[1:]) * (3 * n_heads + 1) + 3 * n_heads] = True
    edges = np.repeat(chosen[:, None], n_backward, axis=1)
    kept = chosen.copy()
    while True:
        incoming = (edges.any(axis=0).astype(float) @ to_backward.T.astype(float)) > 0
        incoming[0] = True  # the input node counts as fed
        new = edges.any(axis=1) & incoming
        reached = (new.astype(float) @ to_backward.astype(float)) > 0
        reached[-1] = True  # logits
        pruned = edges & np.outer(new, reached)
        if np.array_equal(new, kept) and np.array_equal(pruned, edges):
            return kept
        kept, edges = new, pruned


def circuit_size(graph: Graph, pct: float) -> int:
    """How many scored nodes MIB keeps at ``pct`` (a fraction: 0.02 for 2 %)."""
    return int(pct * graph.scored.sum())


def head_node(head: str) -> str:
    """A headloc head name ``L3H7`` as EAP-IG's node ``a3.h7``."""
    layer, head = re.fullmatch(r"L(\d+)H(\d+)", head).groups()
    return f"a{int(layer)}.h{int(head)}"


def read_submission(folder) -> dict[str, Graph]:
    """Every ``<task>_<model>/importances.json`` of a submission folder, by folder name; a folder
    name must split into task and model at its one ``_``."""
    graphs = {}
    for path in sorted(Path(folder).glob(f"*/{IMPORTANCES}")):
        name = path.parent.name
        parts = name.split("_")
        assert len(parts) == 2 and all(parts), f"{name}: expected <task>_<model> with one '_'"
        graphs[name] = read_graph(path)
    return graphs


def ranking_problems(graph: Graph, ranking: list[str], percentages=PERCENTAGES) -> list[str]:
    """Where MIB's circuits of ``graph`` (CPR's signed order and CMD's absolute one) at
    ``percentages`` of the scored nodes differ from the top heads of ``ranking`` (headloc's names)."""
    problems, unscored = [], graph.nodes_where(~graph.scored)
    for absolute in (False, True):
        for pct in percentages:
            n = circuit_size(graph, pct)
            try:
                found = top_n(graph, n, absolute)
            except ValueError as error:
                problems.append(f"{pct:.1%}: {error}")
                continue
            expected = {head_node(head) for head in ranking[:n]} | unscored
            if found != expected:
                problems.append(f"{pct:.1%} (n = {n}, absolute={absolute}): MIB keeps {sorted(found - unscored)}, "
                                f"headloc's top {n} is {sorted(expected - unscored)}")
    return problems


def check_export(folder, results="results") -> dict[str, list[str]]:
    """Each folder of a submission against the recovery.json its sidecar (headloc.tsv) names."""
    with open(Path(folder) / "headloc.tsv", newline="") as handle:
        rows = {row["folder"]: row for row in csv.DictReader(handle, delimiter="\t")}
    found = {}
    for name, graph in read_submission(folder).items():
        row = rows[name]
        record = json.loads((Path(results) / row["model"] / row["task"] / row["search"] / "recovery.json").read_text())
        found[name] = ranking_problems(graph, record["ranking"])
    return found


if __name__ == "__main__":
    checked = check_export(*sys.argv[1:3])
    for folder, problems in checked.items():
        print(f"{folder}: {'ok' if not problems else '; '.join(problems)}")
    sys.exit(1 if not checked or any(checked.values()) else 0)
