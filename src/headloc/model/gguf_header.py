"""Reading a GGUF file's header without its weights: its metadata (a model's architecture,
geometry and chat template) and whether the file is complete, so that a cut-short download is
refused by name before transformers tries to load it.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

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
