"""headloc.report.export: the tidy CSV and the MIB submission, on hand-made recovery records whose
expected rows are written out here. The MIB files are read back with tests/mib_format.py, a reader
written from EAP-IG's Graph.from_json and MIB's circuit selection (not from headloc's writer)."""

import copy
import json
import math

import pandas as pd
import pytest
import transformers

import mib_format
from conftest import REPO, accuracy_demo
from headloc.api.located import Located
from headloc.report.export import TIDY_COLUMNS, mib_cfg, mib_graph, write_submission, write_tidy
from headloc.workflow.config import check_config
from headloc.workflow.key_checks import check_export
from headloc.workflow.schema import validate_config
from headloc.workflow.plan import Plan

CFG = {"n_layers": 2, "n_heads": 2, "d_model": 16, "parallel_attn_mlp": False}


def record(method, coef, ranking, search="s", top=None, task="ioi", model="org/model", n_layers=2, n_heads=2):
    return {"model": model, "task": task, "search": search, "method": method, "n_layers": n_layers,
            "n_heads": n_heads, "coef": coef, "ranking": ranking, "top_heads": top or ranking[:1]}


LASSO = record("cs_stratified", {"L0H0": 0.0, "L0H1": -0.4, "L1H0": 0.2, "L1H1": -0.1},
               ["L0H1", "L1H1", "L0H0", "L1H0"])
GATES = record("chg", {"L0H0": 0.9, "L0H1": 0.1, "L1H0": 0.5, "L1H1": 0.3}, ["L0H0", "L1H0", "L1H1", "L0H1"])
DRAW = record("random", {"L0H0": None, "L0H1": None, "L1H0": None, "L1H1": None},
              ["L1H1", "L0H0", "L1H0", "L0H1"], search="random_s0", top=["L1H1", "L0H0"])
# greedy with the universal filter: its rounds chose L1H0 (a drop of 0.3) and L0H0 (0.1); the
# universal heads it left out (L0H1, L1H1: their one-shot drops, larger) close the ranking
GREEDY_XU = record("greedy", {"L0H0": -0.1, "L0H1": -0.9, "L1H0": -0.3, "L1H1": -0.8},
                   ["L1H0", "L0H0", "L1H1", "L0H1"], search="greedy_k2_xu_n4_s0", top=["L1H0", "L0H0"])


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


# ---------------------------------------------------------------- MIB, read as MIB reads it


@pytest.mark.parametrize("found", [LASSO, GATES, DRAW, GREEDY_XU], ids=["lasso", "chg", "random", "greedy_xu"])
def test_mibs_top_n_is_headlocs_top_n_at_every_n_for_every_method(tmp_path, found):
    """Signed (CPR) and absolute (CMD) order, every circuit size: the greedy record's universal heads
    last, the draw's random order, CHG's gates and the Lasso's drops all kept as ranked."""
    write_submission(tmp_path, [found], {"org/model": CFG})
    graph = mib_format.read_graph(tmp_path / "ioi_org-model" / "importances.json")
    assert graph.scored.sum() == 4  # the heads; input and MLPs are not scored
    for absolute in (False, True):
        for n in range(5):
            assert mib_format.top_n(graph, n, absolute) == {
                *(mib_format.head_node(h) for h in found["ranking"][:n]), "input", "m0", "m1"}, (absolute, n)
    assert mib_format.ranking_problems(graph, found["ranking"]) == []


def test_mibs_percentages_of_a_hundred_heads_follow_a_ranking_full_of_zero_values(tmp_path):
    """A Lasso that kept 30 of 100 heads: 70 values are exactly 0.0 (the issue's 197 of 270 ties), yet
    MIB's circuits at 1, 2, 5, 20 and 50 % of the scored nodes are headloc's top 1, 2, 5, 20, 50."""
    heads = [f"L{i // 10}H{i % 10}" for i in range(100)]
    ranking = heads[::-1]  # the last head first
    coef = {h: (-1.0 + 0.01 * rank if rank < 30 else 0.0) for rank, h in enumerate(ranking)}
    lasso = record("cs_stratified", coef, ranking, n_layers=10, n_heads=10, model="m")
    write_submission(tmp_path, [lasso], {"m": {**CFG, "n_layers": 10, "n_heads": 10}})
    graph = mib_format.read_graph(tmp_path / "ioi_m" / "importances.json")
    for pct, n in ((.01, 1), (.02, 2), (.05, 5), (.2, 20), (.5, 50)):
        assert mib_format.circuit_size(graph, pct) == n
        for absolute in (False, True):
            kept = mib_format.top_n(graph, n, absolute) - graph.nodes_where(~graph.scored)
            assert kept == {mib_format.head_node(h) for h in ranking[:n]}
    assert mib_format.ranking_problems(graph, ranking) == []


def test_the_file_holds_the_whole_cfg_and_leaves_every_mlp_unscored_in_the_graph(tmp_path):
    """Every cfg key Graph.from_model reads (d_model: the KeyError of the issue); input and the MLPs
    NaN and in_graph, so MIB keeps them in every circuit; in_graph of the heads: the top heads."""
    write_submission(tmp_path, [LASSO], {"org/model": CFG})
    data = json.loads((tmp_path / "ioi_org-model" / "importances.json").read_text())
    assert data["cfg"] == CFG and data["edges"] == {}
    assert list(data["nodes"]) == ["input", "a0.h0", "a0.h1", "m0", "a1.h0", "a1.h1", "m1", "logits"]
    for name in ("input", "m0", "m1", "logits"):
        assert data["nodes"][name]["in_graph"] and math.isnan(data["nodes"][name]["score"])
    graph = mib_format.read_graph(tmp_path / "ioi_org-model" / "importances.json")
    assert graph.nodes_where(graph.in_graph) == {"input", "a0.h1", "m0", "m1"}  # the top head, L0H1
    assert mib_format.top_n(graph, 0, False) == {"input", "m0", "m1"}


def test_the_reader_refuses_what_mib_cannot_read_or_order(tmp_path):
    """The reader itself can fail: a cfg without d_model (Graph.from_model's KeyError) and two
    heads tied at a circuit's cut (MIB's argsort may keep either)."""
    path = tmp_path / "importances.json"
    nodes = {"input": {"in_graph": True, "score": math.nan}, "a0.h0": {"in_graph": True, "score": 0.5},
             "a0.h1": {"in_graph": False, "score": 0.5}, "m0": {"in_graph": True, "score": math.nan}}
    path.write_text(json.dumps({"cfg": {"n_layers": 1, "n_heads": 2, "parallel_attn_mlp": False}, "nodes": nodes,
                                "edges": {}}))
    with pytest.raises(KeyError, match="d_model"):
        mib_format.read_graph(path)
    path.write_text(json.dumps({"cfg": {**CFG, "n_layers": 1}, "nodes": nodes, "edges": {}}))
    graph = mib_format.read_graph(path)
    with pytest.raises(ValueError, match="tie at 0.5"):
        mib_format.top_n(graph, 1, False)
    assert mib_format.top_n(graph, 2, True) == {"input", "a0.h0", "a0.h1", "m0"}  # no cut inside the tie


# ---------------------------------------------------------------- the submission folder


def test_one_submission_folder_named_in_mibs_names_with_headlocs_ids_beside(tmp_path):
    other = {**GATES, "task": "capitals_loglik", "model": "smol_lm", "search": "chg_s0"}
    written = write_submission(tmp_path, [LASSO, other], {"org/model": CFG, "smol_lm": CFG},
                               tasks={"ioi": "ioi"}, models={"org/model": "qwen2.5"})
    assert written == [tmp_path / "ioi_qwen2.5" / "importances.json",
                       tmp_path / "capitals-loglik_smol-lm" / "importances.json"]
    assert set(mib_format.read_submission(tmp_path)) == {"ioi_qwen2.5", "capitals-loglik_smol-lm"}
    ids = pd.read_csv(tmp_path / "headloc.tsv", sep="\t")
    assert ids[["folder", "model", "task", "search", "method"]].values.tolist() == [
        ["ioi_qwen2.5", "org/model", "ioi", "s", "cs_stratified"],
        ["capitals-loglik_smol-lm", "smol_lm", "capitals_loglik", "chg_s0", "chg"]]
    # records without per-head status count no head of any; the second folder's names are outside MIB's lists
    assert ids[["measured", "estimated", "unmeasured"]].values.tolist() == [[0, 0, 0], [0, 0, 0]]
    assert ids["mib_skips"].isna().tolist() == [True, False]


def test_bad_names_and_two_searches_in_one_folder_are_refused(tmp_path):
    with pytest.raises(ValueError, match="MIB task name 'IOI' .*not one of MIB's: ioi, mcqa, arithmetic-addition"):
        write_submission(tmp_path, [LASSO], {"org/model": CFG}, tasks={"ioi": "IOI"})
    with pytest.raises(ValueError, match="MIB model name 'qwen' .*gpt2, qwen2.5, gemma2, llama3, interpbench"):
        write_submission(tmp_path, [LASSO], {"org/model": CFG}, models={"org/model": "qwen"})
    with pytest.raises(ValueError, match=r"searches 's' .* and 'greedy_k2_xu_n4_s0' .* both export to .*ioi_org-model"):
        write_submission(tmp_path, [LASSO, GREEDY_XU], {"org/model": CFG})
    with pytest.raises(ValueError, match="no graph config for model 'org/model'; configs given for: other"):
        write_submission(tmp_path, [LASSO], {"other": CFG})


def test_a_ranking_that_misses_a_head_or_a_config_of_another_model_is_refused():
    with pytest.raises(ValueError, match="ranks 4 heads \\(3 distinct\\), expected each of the model's 4 heads once"):
        mib_graph({**LASSO, "ranking": ["L0H1", "L0H1", "L0H0", "L1H0"]}, CFG)
    with pytest.raises(ValueError, match="model of 2 layers x 2 heads, but its model's config says 3 x 2"):
        mib_graph(LASSO, {**CFG, "n_layers": 3})


@pytest.mark.parametrize("config, cfg", [
    (transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4),
     {"n_layers": 3, "n_heads": 4, "d_model": 64, "parallel_attn_mlp": False}),
    (transformers.GPT2Config(n_embd=48, n_layer=2, n_head=6), {"n_layers": 2, "n_heads": 6, "d_model": 48,
                                                                "parallel_attn_mlp": False}),
    (transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4),
     {"n_layers": 2, "n_heads": 4, "d_model": 32, "parallel_attn_mlp": True}),  # use_parallel_residual's default
    (transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                use_parallel_residual=False),
     {"n_layers": 2, "n_heads": 4, "d_model": 32, "parallel_attn_mlp": False}),
    (transformers.GPTJConfig(n_embd=32, n_layer=2, n_head=4, rotary_dim=4),
     {"n_layers": 2, "n_heads": 4, "d_model": 32, "parallel_attn_mlp": True}),
    (transformers.FalconConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, parallel_attn=False),
     {"n_layers": 2, "n_heads": 4, "d_model": 32, "parallel_attn_mlp": False}),
    (transformers.FalconConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, parallel_attn=False,
                               new_decoder_architecture=True, num_kv_heads=2),  # always parallel
     {"n_layers": 2, "n_heads": 4, "d_model": 32, "parallel_attn_mlp": True}),
    (transformers.StableLmConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4),
     {"n_layers": 2, "n_heads": 4, "d_model": 32, "parallel_attn_mlp": False}),  # use_parallel_residual's default
], ids=["llama", "gpt2", "neox", "neox-sequential", "gptj", "falcon-sequential", "falcon-40b", "stablelm"])
def test_the_graph_config_is_read_from_the_models_config(config, cfg):
    assert mib_cfg(config) == cfg


def test_located_save_writes_a_submission_that_mib_reads(tmp_path):
    """The library's path: Located.save, its graph config read from the model's config."""
    config = transformers.LlamaConfig(hidden_size=24, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
    found = Located(record={**GREEDY_XU, "model": "my_model", "task": "headloc_ioi_margin", "n_evals": 5},
                    parameters={}, task=None, model=transformers.LlamaForCausalLM(config), tokenizer=None)
    found.save(tmp_path / "saved", mib_task="ioi", mib_model="gpt2")
    graph = mib_format.read_submission(tmp_path / "saved" / "mib")["ioi_gpt2"]
    assert graph.cfg == {**CFG, "d_model": 24}
    assert mib_format.ranking_problems(graph, GREEDY_XU["ranking"], percentages=(.25, .5, .75, 1)) == []
    found.save(tmp_path / "plain")
    assert list(mib_format.read_submission(tmp_path / "plain" / "mib")) == ["headloc-ioi-margin_my-model"]


# ---------------------------------------------------------------- the config section export.mib


@pytest.fixture
def config():
    found = accuracy_demo()
    found["search"]["methods"] = ["cs_stratified", "greedy1s"]
    validate_config(found, REPO / "config/schema.yaml")
    return found


def test_the_submission_holds_the_main_method_unless_export_names_another(config):
    assert "export" not in config  # absent: the config (and its digest) stays as it was
    assert Plan(config).export_searches() == [("ioi", "cs_stratified_m100_p0.05_n20_s0"),
                                              ("capitals", "cs_stratified_m100_p0.05_n20_s0"),
                                              ("induction", "cs_stratified_m100_p0.05_n20_s0")]
    config["export"] = {"mib": {"method": "greedy1s"}}
    validate_config(config, REPO / "config/schema.yaml")
    assert config["export"]["mib"] == {"method": "greedy1s", "tasks": {}, "models": {}}
    assert check_export(config) == []
    assert Plan(config).export_searches()[0] == ("ioi", "greedy1s_n20_s0")


def test_export_names_and_method_are_checked(config):
    bad = copy.deepcopy(config)
    bad["export"] = {"mib": {"method": "greedy", "tasks": {"ioi": "ioi", "capitals": "ioi", "nope": "mcqa"},
                             "models": {"smollm2-135m": "smollm"}}}
    assert check_export(bad) == [
        ("export.mib.method", "'greedy' is not run on task 'ioi'; expected a method run on every searched task "
                              "(search.methods, tasks.<name>.search.methods)"),
        ("export.mib.method", "'greedy' is not run on task 'capitals'; expected a method run on every searched task "
                              "(search.methods, tasks.<name>.search.methods)"),
        ("export.mib.method", "'greedy' is not run on task 'induction'; expected a method run on every searched task "
                              "(search.methods, tasks.<name>.search.methods)"),
        ("export.mib.tasks.nope", "'nope' is not a searched task; valid: ioi, capitals, induction"),
        ("export.mib.tasks", "'ioi' and 'capitals' would all be named 'ioi' in the MIB submission; expected one name "
                             "per task"),
        ("export.mib.models.smollm2-135m", "'smollm' is not one of MIB's models; valid: gpt2, qwen2.5, gemma2, "
                                           "llama3, interpbench"),
    ]
    bad["export"]["mib"] = {"method": "lasso"}
    assert check_export(bad)[0][1].startswith("'lasso' is not a search method; valid: ")
    with pytest.raises(ValueError, match="config export.mib.method: 'lasso' is not a search method"):
        check_config(bad, {})


# ---------------------------------------------------------------- what was measured

# guided greedy: two heads measured, two never scored (their values are placeholders)
GUIDED = {**record("guided_greedy", {"L0H0": -0.5, "L0H1": -0.2, "L1H0": 0.0, "L1H1": 0.0},
                   ["L0H0", "L0H1", "L1H1", "L1H0"], search="guided", top=["L0H0", "L0H1"]),
          "status": {"L0H0": "measured", "L0H1": "measured", "L1H0": "unmeasured", "L1H1": "unmeasured"},
          "interval": {"L0H0": [-0.7, -0.3], "L0H1": [-0.4, 0.05], "L1H0": None, "L1H1": None},
          "p_top_k": {"L0H0": 1.0, "L0H1": 0.8, "L1H0": None, "L1H1": None}, "found": ["L0H0"]}


def test_unmeasured_heads_tie_below_every_measured_head_in_mibs_order(tmp_path):
    write_submission(tmp_path, [GUIDED], {"org/model": CFG})
    graph = mib_format.read_graph(tmp_path / "ioi_org-model" / "importances.json")
    unscored = {"input", "m0", "m1"}
    for absolute in (False, True):
        assert mib_format.top_n(graph, 1, absolute) == {"a0.h0", *unscored}
        assert mib_format.top_n(graph, 2, absolute) == {"a0.h0", "a0.h1", *unscored}
        with pytest.raises(ValueError, match="tie"):  # MIB may take either unmeasured head: they tie
            mib_format.top_n(graph, 3, absolute)
    sidecar = pd.read_csv(tmp_path / "headloc.tsv", sep="\t")
    assert sidecar[["measured", "estimated", "unmeasured"]].values.tolist() == [[2, 0, 2]]


def test_universal_heads_rank_after_the_others_as_table_2_filters_them(tmp_path):
    """With the universal filter on, MIB's top n is the filtered ranking's, the universal head after
    every other scored one, so MIB scores the circuit Table 2 validates."""
    write_submission(tmp_path, [LASSO], {"org/model": CFG}, universal={"org/model": ["L0H1"]})
    graph = mib_format.read_graph(tmp_path / "ioi_org-model" / "importances.json")
    filtered = ["L1H1", "L0H0", "L1H0", "L0H1"]  # LASSO's ranking, L0H1 (its first head) moved last
    assert mib_format.ranking_problems(graph, filtered) == []
    graph_json = json.loads((tmp_path / "ioi_org-model" / "importances.json").read_text())
    assert [n for n, node in graph_json["nodes"].items() if n.startswith("a") and node["in_graph"]] == ["a1.h1"]
    sidecar = pd.read_csv(tmp_path / "headloc.tsv", sep="\t")
    assert sidecar["universal_ranked_down"].tolist() == ["L0H1"]


def test_a_folder_mib_would_skip_is_named_in_the_sidecar_and_the_log(tmp_path, caplog):
    import logging

    log = logging.getLogger("test-export")
    write_submission(tmp_path, [LASSO], {"org/model": CFG}, models={"org/model": "gpt2"}, log=log)
    write_submission(tmp_path / "other", [LASSO], {"org/model": CFG}, tasks={"ioi": "ioi"}, log=log)
    assert pd.read_csv(tmp_path / "headloc.tsv", sep="\t")["mib_skips"].isna().all()  # ioi_gpt2: read
    skipped = pd.read_csv(tmp_path / "other" / "headloc.tsv", sep="\t")["mib_skips"].tolist()
    assert skipped == ["model 'org-model' not in MIB's lists: MIB's evaluation skips this folder"]
    assert "ioi_org-model: model 'org-model' not in MIB's lists" in caplog.text


def test_tidy_rows_carry_each_heads_status_interval_and_whether_it_was_found(tmp_path):
    write_tidy(tmp_path / "heads.csv", [GUIDED, LASSO])
    table = pd.read_csv(tmp_path / "heads.csv")
    guided = table[table["search"] == "guided"].set_index("head")
    assert guided.loc["L0H0", ["status", "low", "high", "p_top_k"]].tolist() == ["measured", -0.7, -0.3, 1.0]
    assert guided["found"].tolist() == [True, False, False, False]
    assert guided.loc["L1H0", "status"] == "unmeasured" and math.isnan(guided.loc["L1H0", "low"])
