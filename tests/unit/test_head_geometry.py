"""headloc.model.geometry.head_geometry: the jobs' head geometry without torch, the same as transformers'."""

import json
import subprocess
import sys

import pytest

from headloc.model import geometry
from headloc.heads import HeadGeometry
from headloc.model.geometry import head_geometry
from headloc.model.loading import load_config


def tiny_configs():
    """A small config of each kind of folder: plain ones of several architectures (each with its
    own names for the numbers) and a composite one (a Llava: its text config inside)."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig, LlavaConfig, PhiConfig, Qwen2Config

    return {
        "llama": LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32),
        "gpt2": GPT2Config(n_layer=3, n_head=2, n_embd=8),
        "gpt_neox": GPTNeoXConfig(num_hidden_layers=5, num_attention_heads=2, hidden_size=16),
        "qwen2": Qwen2Config(num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=2, hidden_size=48),
        "phi": PhiConfig(num_hidden_layers=3, num_attention_heads=4, hidden_size=32),
        "llava": LlavaConfig(text_config=LlamaConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32)),
    }


@pytest.fixture(scope="module")
def saved_configs(tmp_path_factory):
    out = {}
    for name, config in tiny_configs().items():
        folder = tmp_path_factory.mktemp(name)
        config.save_pretrained(folder)
        out[name] = folder
    return out


@pytest.mark.parametrize("name", ["llama", "gpt2", "gpt_neox", "qwen2", "phi", "llava"])
def test_same_geometry_as_transformers(saved_configs, name):
    folder = str(saved_configs[name])
    assert head_geometry(folder) == HeadGeometry.of(load_config(folder))


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_a_plain_folder_is_read_without_transformers(saved_configs, name, monkeypatch):
    expected = HeadGeometry.of(load_config(str(saved_configs[name])))
    monkeypatch.setattr(geometry, "load_config", lambda *a, **k: pytest.fail("went through AutoConfig"))
    assert head_geometry(str(saved_configs[name])) == expected
    code = ("import sys; from headloc.model.geometry import head_geometry; "
            f"print(head_geometry({str(saved_configs[name])!r})); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[1] == "False"


def test_composite_or_silent_configs_go_through_autoconfig(saved_configs, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(geometry, "load_config", lambda location: calls.append(location) or
                        type("Config", (), {"num_hidden_layers": 7, "num_attention_heads": 3})())
    assert head_geometry(str(saved_configs["llava"])) == HeadGeometry(7, 3)  # composite: text config inside
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2}))
    assert head_geometry(str(tmp_path)) == HeadGeometry(7, 3)  # no head count: transformers' default
    assert head_geometry("org/hub-model") == HeadGeometry(7, 3)  # a hub id
    assert calls == [str(saved_configs["llava"]), str(tmp_path), "org/hub-model"]


@pytest.mark.parametrize("name", ["llama", "gpt2", "gpt_neox", "qwen2", "phi", "llava"])
def test_geometry_record_is_what_transformers_reads(saved_configs, name):
    """Rule model_geometry's record (Table 1), recomputed here from transformers' own config."""
    config = load_config(str(saved_configs[name]))
    text = config.get_text_config()
    expected_kv = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    assert geometry.geometry_record(str(saved_configs[name])) == {
        "model_type": config.model_type, "n_layers": text.num_hidden_layers,
        "n_heads": text.num_attention_heads, "n_kv_heads": expected_kv,
        "total": text.num_hidden_layers * text.num_attention_heads}


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_a_plain_folder_naming_its_kv_heads_records_without_torch(saved_configs, name):
    code = ("import sys; from headloc.model.geometry import geometry_record; "
            f"print(geometry_record({str(saved_configs[name])!r})['n_kv_heads']); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["2", "False"]
