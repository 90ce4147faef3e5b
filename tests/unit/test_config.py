"""headloc.workflow.config: schema errors worded by key path, cross-key rules, offline model geometry."""

import copy
import json
import struct

import pytest

from conftest import REPO, accuracy_demo
from headloc.workflow.config import check_config, model_geometries
from headloc.workflow.schema import expected, validate_config
from headloc.workflow.task_lookup import lm_eval_tasks
from headloc.heads import HeadGeometry as Geometry
from headloc.model.geometry import source_geometry
from headloc.model.gguf_header import read_gguf_metadata
from headloc.model.loading import resolve_source

SCHEMA = REPO / "config/schema.yaml"
DEMO = accuracy_demo()  # the demo's own config is checked in test_config_docs
GEOMETRY = {"smollm2-135m": Geometry(30, 9)}


def validated(**changes):
    config = copy.deepcopy(DEMO)
    for path, value in changes.items():
        node = config
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    validate_config(config, SCHEMA)
    return config


def test_defaults_are_filled_in():
    config = validated()
    assert config["validation"]["method"] == "cs_stratified" and config["tasks"]["capitals"]["chat"] is False
    assert config["universal"] == {"detect": "damage", "top_n": 5, "min_drop": 0.1, "min_capabilities": 2,
                                   "filter": True, "heads": {}}
    check_config(config, GEOMETRY)


def test_the_schema_s_run_shape_defaults_are_the_library_s():
    """A model without batch_size, masks_per_pass or validation.top_k gets the values headloc.locate
    and the engine use when given none (headloc.heads), so a notebook and the workflow agree."""
    from headloc.heads import BATCH_SIZE, MASKS_PER_PASS, TOP_K

    config = copy.deepcopy(DEMO)
    config["models"]["smollm2-135m"] = {"source": config["models"]["smollm2-135m"]["source"]}
    config.pop("validation", None)
    validate_config(config, SCHEMA)
    model = config["models"]["smollm2-135m"]
    assert (model["batch_size"], model["masks_per_pass"], config["validation"]["top_k"]) == (BATCH_SIZE, MASKS_PER_PASS, TOP_K)


@pytest.mark.parametrize("changes,message", [
    ({"search__alpha": "auto"}, "config search.alpha: 'auto' is not valid; expected a number >= 0 or one of: cv"),
    ({"search__seed": -1}, "config search.seed: -1 is not >= 0; expected an integer >= 0"),
    ({"tasks__ioi__chat": "yes"}, "config tasks.ioi.chat: 'yes' is not valid; expected true or false"),
    ({"serach": {}}, "config: unknown key 'serach'; valid keys: chg, conditional_group_testing, data, export, group_testing, guided_greedy, include_path, knowledge, models, report, screened_greedy, search, tasks, thompson"),
    ({"validation__headsets": ["L1X"]}, "config validation.headsets[0]: 'L1X' is not valid; expected a string matching"),
    ({"search__methods": ["greedy1s", "greedy1s"]}, "config search.methods: ['greedy1s', 'greedy1s'] repeats an item"),
    ({"universal__heads": {"smollm2-135m": ["l1h5"]}},
     "config universal.heads.smollm2-135m[0]: 'l1h5' is not valid; expected a string matching"),
])
def test_schema_errors_name_the_key_and_what_is_valid(changes, message):
    with pytest.raises(ValueError) as error:
        validated(**changes)
    assert message in str(error.value)


def test_missing_required_key_and_every_error_listed():
    config = copy.deepcopy(DEMO)
    del config["models"]["smollm2-135m"]["source"]
    config["search"]["chunks"] = 0
    with pytest.raises(ValueError) as error:
        validate_config(config, SCHEMA)
    assert str(error.value).splitlines() == [
        "config models.smollm2-135m: missing key 'source'; required: source",
        "config search.chunks: 0 is not >= 1; expected an integer >= 1",
    ]


def test_expected_in_words():
    assert expected({"type": ["integer", "null"], "minimum": 1}) == "an integer >= 1 or null"
    assert expected({"type": "number", "minimum": 0, "maximum": 1}) == "a number in [0, 1]"


@pytest.mark.parametrize("changes,message", [
    ({"validation__gen_tasks": ["gsm8k"]},
     "config validation.gen_tasks[0]: 'gsm8k' is not a configured task; valid: ioi, capitals, induction"),
    ({"knowledge__tasks": ["ioi", "wmdp"]}, "config knowledge.tasks[1]: 'wmdp' is not a searched task"),
    ({"knowledge__eval_tasks": ["mmlu"]}, "config knowledge.eval_tasks[0]: 'mmlu' is not a configured task"),
    ({"knowledge__tasks": ["ioi"], "knowledge__min_tasks": 2},
     "config knowledge.min_tasks: 2 is larger than the 1 knowledge.tasks; expected 1..1 or null"),
    ({"tuning__tasks": ["ioi", "capitals", "gsm8k"]}, "config tuning.tasks[2]: 'gsm8k' is not a searched task"),
    ({"report__capability": "math"},
     "config report.capability: 'math' is not the capability of a searched task; valid: ioi, capitals, induction or null"),
    ({"validation__headsets": ["L1H2+L0H9"]},
     "config validation.headsets[0]: head L0H9 is outside the model: model smollm2-135m has layers 0..29 and heads 0..8"),
    ({"universal__top_n": 300}, "config universal.top_n: 300 is larger than the 270 heads of model smollm2-135m"),
    ({"universal__heads": {"smollm2-135m": ["L1H5", "L30H0"]}},
     "config universal.heads.smollm2-135m[1]: head L30H0 is outside the model: model smollm2-135m has layers 0..29"),
    ({"universal__heads": {"llama": ["L1H5"]}},
     "config universal.heads.llama: 'llama' is not a configured model; valid: smollm2-135m"),
    ({"tasks__ioi__search": {"methods": ["greedy1s"]}},
     "config tasks.ioi.search.methods: ['greedy1s'] lacks validation.method 'cs_stratified'"),
    ({"tasks__ioi__data_file": "/no/such.jsonl"},
     "config tasks.ioi.data_file: '/no/such.jsonl' does not exist; expected a JSONL file"),
    ({"data__mirror": "/no/such/dir"}, "config data.mirror: '/no/such/dir' is not a directory"),
    ({"tasks__ioi__localize": False, "tasks__capitals__localize": False, "tasks__induction__localize": False},
     "config tasks: no task has localize: true"),
])
def test_cross_key_rules(changes, message):
    config = validated(**changes)
    with pytest.raises(ValueError) as error:
        check_config(config, GEOMETRY)
    assert message in str(error.value)


def test_unknown_geometry_skips_the_head_checks():
    config = validated(validation__headsets=["L99H0"], validation__top_k=1000)
    check_config(config, {"smollm2-135m": None})
    with pytest.raises(ValueError, match="L99H0 is outside"):
        check_config(config, GEOMETRY)


def test_every_shipped_task_is_known():
    assert {"headloc_ioi", "headloc_capitals", "headloc_induction", "headloc_swear", "headloc_rhyme"} <= set(
        lm_eval_tasks())


def test_geometry_offline_from_gguf_folder_and_hub(tmp_path):
    assert model_geometries(DEMO) == GEOMETRY  # the embedded GGUF's header
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"num_hidden_layers": 4, "num_attention_heads": 6}}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert source_geometry(resolve_source(str(tmp_path))) == (4, 6)
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 12, "n_head": 12}))  # GPT-2 spelling
    assert source_geometry(resolve_source(str(tmp_path))) == (12, 12)
    assert source_geometry(resolve_source("no-such-org/no-such-model")) is None  # not cached offline
    with pytest.raises(ValueError, match="config models.m.source: unknown model 'smollm3'"):
        model_geometries({"models": {"m": {"source": "smollm3"}}})


def test_gguf_header_reader(tmp_path):
    def string(text):
        data = text.encode()
        return struct.pack("<Q", len(data)) + data

    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 3)
    header += string("general.architecture") + struct.pack("<I", 8) + string("qwen2")
    header += string("tokenizer.scores") + struct.pack("<IIQ", 9, 6, 2) + struct.pack("<2f", 0.5, 1.5)
    header += string("qwen2.block_count") + struct.pack("<II", 4, 28)
    (tmp_path / "m.gguf").write_bytes(header)
    assert read_gguf_metadata(tmp_path / "m.gguf") == {
        "general.architecture": "qwen2", "tokenizer.scores": None, "qwen2.block_count": 28}
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(ValueError, match="x.gguf is not a GGUF file"):
        read_gguf_metadata(tmp_path / "x.gguf")


def test_masks_per_pass_must_fit_in_a_batch():
    from headloc.workflow.schema import validate_config

    config = {"models": {"m": {"source": "x", "batch_size": 4, "masks_per_pass": 8}},
              "tasks": {"ioi": {"lm_eval_task": "headloc_ioi"}}}
    validate_config(config, SCHEMA)
    with pytest.raises(ValueError, match=r"config models\.m\.masks_per_pass: 8 is larger than batch_size 4"):
        check_config(config, {"m": None})
