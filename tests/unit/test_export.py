"""headloc.report.export: the tidy CSV and the MIB node format, on hand-made recovery records whose
expected rows are written out here."""

import json
import math

import pandas as pd
import pytest

from headloc.report.export import TIDY_COLUMNS, mib_graph, mib_path, write_mib, write_tidy


def record(method, coef, ranking, search="s", top=None):
    return {"model": "org/model", "task": "ioi", "search": search, "method": method, "n_layers": 2, "n_heads": 2,
            "coef": coef, "ranking": ranking, "top_heads": top or ranking[:1]}


LASSO = record("cs_stratified", {"L0H0": 0.0, "L0H1": -0.4, "L1H0": 0.2, "L1H1": -0.1},
               ["L0H1", "L1H1", "L0H0", "L1H0"])
GATES = record("chg", {"L0H0": 0.9, "L0H1": 0.1, "L1H0": 0.5, "L1H1": 0.3}, ["L0H0", "L1H0", "L1H1", "L0H1"])
DRAW = record("random", {"L0H0": None, "L0H1": None, "L1H0": None, "L1H1": None},
              ["L1H1", "L0H0", "L1H0", "L0H1"], search="random_s0", top=["L1H1", "L0H0"])


def test_tidy_rows_hold_each_heads_value_and_rank(tmp_path):
    write_tidy(tmp_path / "heads.csv", [LASSO, DRAW])
    table = pd.read_csv(tmp_path / "heads.csv")
    assert tuple(table.columns) == TIDY_COLUMNS
    lasso = table[table["search"] == "s"]
    assert lasso[["head", "layer", "index", "value", "rank"]].values.tolist() == [
        ["L0H0", 0, 0, 0.0, 3], ["L0H1", 0, 1, -0.4, 1], ["L1H0", 1, 0, 0.2, 4], ["L1H1", 1, 1, -0.1, 2]]
    draw = table[table["search"] == "random_s0"]
    assert draw["value"].isna().all() and draw.set_index("head")["rank"].to_dict() == {
        "L0H0": 2, "L0H1": 4, "L1H0": 3, "L1H1": 1}


@pytest.mark.parametrize("found, scores", [
    (LASSO, {"a0.h0": 0.0, "a0.h1": 0.4, "a1.h0": -0.2, "a1.h1": 0.1}),  # minus the change: the drop
    (GATES, {"a0.h0": 0.9, "a0.h1": 0.1, "a1.h0": 0.5, "a1.h1": 0.3}),  # already highest first
])
def test_mib_scores_put_the_first_ranked_head_highest(found, scores):
    graph = mib_graph(found)
    assert graph["cfg"] == {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False}
    assert {n: node["score"] for n, node in graph["nodes"].items() if n.startswith("a")} == scores
    assert [n for n, node in graph["nodes"].items() if n.startswith("a") and node["in_graph"]] == [
        "a0.h1" if found is LASSO else "a0.h0"]
    assert list(graph["nodes"]) == ["input", "a0.h0", "a0.h1", "m0", "a1.h0", "a1.h1", "m1", "logits"]
    assert all(graph["nodes"][n]["in_graph"] and math.isnan(graph["nodes"][n]["score"])
               for n in ("input", "m0", "m1", "logits"))
    assert graph["edges"] == {}


def test_a_draw_is_written_unscored_and_files_go_to_task_model_folders(tmp_path):
    (path,) = write_mib(tmp_path, [DRAW])
    assert path == mib_path(tmp_path, DRAW) == tmp_path / "random_s0" / "ioi_org-model" / "importances.json"
    nodes = json.loads(path.read_text())["nodes"]
    assert all(math.isnan(nodes[f"a{h // 2}.h{h % 2}"]["score"]) for h in range(4))
    assert [n for n in nodes if n.startswith("a") and nodes[n]["in_graph"]] == ["a0.h0", "a1.h1"]
    with pytest.raises(ValueError, match="two searches export to .*random_s0/ioi_org-model/importances.json"):
        write_mib(tmp_path, [DRAW, DRAW])
