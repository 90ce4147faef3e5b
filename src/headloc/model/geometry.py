"""A model's head geometry read from its config alone, without torch where it can be.

The workflow's jobs and the config check need only a model's layers and heads; importing
transformers and torch for that costs about 4 s of CPU a job, so a plain config.json or a GGUF header
is read directly and transformers' AutoConfig is asked only where those do not say.
"""

from __future__ import annotations

import json
from pathlib import Path

from headloc.heads import HeadGeometry
from headloc.model.gguf_header import check_gguf, read_gguf_metadata
from headloc.model.loading import ModelSource, load_config

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
