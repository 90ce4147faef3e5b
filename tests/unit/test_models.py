import json

import pytest

from headloc.model.loading import check_checkpoint_dir, resolve_source


def test_embedded_model_is_a_packaged_gguf():
    source = resolve_source("smollm2-135m-instruct")
    assert source.form == "gguf" and source.needs_preparation
    assert source.location.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")


def test_hub_ids_and_directories(tmp_path):
    assert resolve_source("meta-llama/Llama-3.2-1B-Instruct").form == "hub"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    source = resolve_source(str(tmp_path))
    assert source.form == "directory" and not source.needs_preparation


@pytest.mark.parametrize("name,message", [
    ("smollm3", "unknown model 'smollm3': expected an embedded model"),
    ("./missing/dir", "model path './missing/dir' does not exist"),
    ("/no/such/file.gguf", "model file '/no/such/file.gguf' does not exist"),
])
def test_bad_names_raise_clearly(name, message):
    with pytest.raises(ValueError, match=message):
        resolve_source(name)


def test_directory_without_config_or_weights(tmp_path):
    with pytest.raises(ValueError, match="has no config.json"):
        check_checkpoint_dir(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"has no weights \(expected \*.safetensors"):
        resolve_source(str(tmp_path))


@pytest.mark.slow
def test_converted_gguf_is_an_ordinary_checkpoint(smollm2_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(smollm2_dir)
    assert (config.model_type, config.num_hidden_layers, config.num_attention_heads) == ("llama", 30, 9)
    assert not hasattr(config, "quantization_config")
    assert resolve_source(str(smollm2_dir)).form == "directory"


@pytest.mark.slow
def test_converted_weights_are_the_gguf_tensors_dequantized(smollm2_dir):
    """Every converted tensor checked against gguf's own dequantization of the file, read apart
    from transformers (q and k are left out: llama.cpp stores them permuted for its rotary layout)."""
    import numpy as np
    from gguf import GGUFReader, dequantize
    from safetensors.numpy import load_file

    from conftest import smollm2_gguf

    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}
    for block in range(30):
        for ours, theirs in (("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"),
                             ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"), ("ffn_down", "mlp.down_proj"),
                             ("attn_norm", "input_layernorm"), ("ffn_norm", "post_attention_layernorm")):
            names[f"blk.{block}.{ours}"] = f"model.layers.{block}.{theirs}"
    saved = load_file(smollm2_dir / "model.safetensors")
    checked = 0
    for tensor in GGUFReader(smollm2_gguf()).tensors:
        name = tensor.name.removesuffix(".weight")
        if name in names:
            expected = dequantize(tensor.data, tensor.tensor_type).reshape(saved[names[name] + ".weight"].shape)
            np.testing.assert_array_equal(saved[names[name] + ".weight"], expected, err_msg=tensor.name)
            checked += 1
    assert checked == len(names) == 2 + 30 * 7


def write_gguf(path, value: int):
    """A small GGUF file of one tensor and one metadata value, ``test.value``."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("test.value", value)
    writer.add_tensor("tok", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file()
    writer.close()


def test_a_conversion_parses_its_file_once_and_afterwards_gguf_reads_anew(tmp_path, monkeypatch):
    """Within a conversion two reads of the file are one parse; once it has ended (here it fails in
    its tokenizer step) a file written again at the same path is read as it is now, and no
    checkpoint folder is left."""
    import gguf

    from headloc.model import loading

    path = tmp_path / "small.gguf"
    write_gguf(path, 1)
    seen = []

    def tokenizer(gguf_path):
        seen.append(gguf.GGUFReader(str(gguf_path)) is gguf.GGUFReader(str(gguf_path)))
        raise RuntimeError("the tokenizer step failed")

    monkeypatch.setattr(loading, "gguf_tokenizer", tokenizer)
    with pytest.raises(RuntimeError, match="tokenizer step failed"):
        loading.convert_gguf(str(path), str(tmp_path / "out"))
    assert seen == [True]
    write_gguf(tmp_path / "new.gguf", 2)
    (tmp_path / "new.gguf").replace(path)  # another file at the same path
    assert gguf.GGUFReader(str(path)).fields["test.value"].parts[-1].tolist() == [2]
    assert not (tmp_path / "out").exists()


def test_a_truncated_gguf_is_named_before_any_job(tmp_path):
    from headloc.workflow.config import model_geometries
    from headloc.model.gguf_header import check_gguf
    from headloc.model.loading import resolve_source

    whole = resolve_source("smollm2-135m-instruct").location
    check_gguf(whole)  # the shipped file is complete
    data = open(whole, "rb").read()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])  # header intact, tensors cut
    with pytest.raises(ValueError, match=rf"config models.m.source: {cut} is not a complete GGUF file: its "
                                         rf"tensors need {len(data)} bytes, the file has {len(data) // 2}"):
        model_geometries({"models": {"m": {"source": str(cut)}}})
    cut.write_bytes(data[:1000])  # cut inside the header
    with pytest.raises(ValueError, match=f"{cut} is not a complete GGUF file: it ends inside its header"):
        check_gguf(cut)


@pytest.mark.parametrize("model_type, why", [
    ("bert", "is an encoder (bidirectional attention), not a causal decoder"),
    ("mamba", "is not an architecture whose attention output projections headloc has checked"),
])
def test_a_model_headloc_cannot_ablate_is_refused_at_parse(tmp_path, model_type, why):
    """A checkpoint folder (config.json and weights, built with transformers) of an encoder or of a
    decoder without per-head attention output fails the config check, before any job, naming the
    model types that would work."""
    from architectures import tiny_decoder

    from headloc.model.architectures import SUPPORTED_MODEL_TYPES
    from headloc.workflow.config import model_geometries

    tiny_decoder(model_type).save_pretrained(tmp_path)
    with pytest.raises(ValueError) as error:
        model_geometries({"models": {"m": {"source": str(tmp_path)}}})
    message = str(error.value)
    assert message.startswith(f"config models.m.source: '{tmp_path}': model_type '{model_type}' {why}")
    assert "headloc ablates the heads of decoder-only models" in message
    assert message.endswith(f"supported model types: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}")


def test_a_supported_decoder_passes_the_parse(tmp_path):
    from architectures import tiny_decoder

    from headloc.workflow.config import model_geometries

    tiny_decoder("olmo2").save_pretrained(tmp_path)  # not in the old hand list of ten
    from headloc.heads import HeadGeometry

    assert model_geometries({"models": {"m": {"source": str(tmp_path)}}})["m"] == HeadGeometry(2, 4)
