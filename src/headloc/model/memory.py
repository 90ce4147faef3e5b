"""A model's memory on an accelerator: what an evaluation job will need, estimated from config.json.

The estimate of one forward pass's peak is the sum of

* **weights**: the parameters in the configured dtype;
* **KV cache**: keys and values of every layer for ``rows`` rows at the longest context plus the
  generated tokens (2 x layers x key/value heads x head_dim per token; generation tasks only);
* **kept logits**: ``rows x positions x vocab`` logits and their log-softmax (lm-eval scores
  every position of a plain pass; a mask group keeps only the scored positions; generation keeps
  the last one);
* **activations**: one layer's transient tensors for ``rows x tokens`` (the MLP's gate, up and
  activation, the attention's inputs and outputs): ``3 x intermediate + 6 x hidden`` values a token.

Torch-free and offline (config.json only), so the config check can run it at parse time; the GPU
check (benchmarks/gpu_check.py) compares it with ``torch.cuda.max_memory_allocated`` on a real card.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}
GIB = 1024**3
AUTO_ROWS = 512  # where `batch_size: auto` starts on an accelerator (then halved on out-of-memory)
CPU_ROWS = 16  # what `batch_size: auto` means on a CPU (the config's default batch_size)


def resolve_rows(batch_size, device: str) -> int:
    """The first rows per pass for a configured ``batch_size``: an integer as it is; ``"auto"``
    :data:`AUTO_ROWS` on an accelerator (headloc.engine.backoff halves it until a pass fits) and
    :data:`CPU_ROWS` on a CPU, where running out of memory is no error to recover from but a
    killed process."""
    if batch_size == "auto":
        return CPU_ROWS if str(device).startswith("cpu") else AUTO_ROWS
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer or 'auto', got {batch_size!r}")
    return batch_size


HUB_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([BM])(?![A-Za-z])")  # "...-8B-...", "...-135M"


def config_parameters(cfg: dict) -> int | None:
    """Parameters of a decoder-only transformer from its config.json (None if it lacks a size)."""
    shape = Shape.of(cfg)
    return shape.parameters if shape else None


def offline_config(source) -> dict | None:
    """The config.json of a model source (:class:`headloc.model.loading.ModelSource`) read offline:
    a checkpoint folder's, or a hub model's in the local Hugging Face cache; None otherwise."""
    if source.form == "directory":
        config_file = Path(source.location) / "config.json"
    elif source.form == "hub":
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(source.location, "config.json")
        config_file = Path(cached) if isinstance(cached, str) else None
    else:
        return None
    return json.loads(config_file.read_text()) if config_file is not None and config_file.is_file() else None


def source_parameters(source) -> int | None:
    """Parameter count of a model source, read offline: its config.json, a GGUF file's size (at
    most 4 bits a weight), or a hub id's name ("...-8B-..."); None when it cannot be known."""
    if source.form == "gguf":
        return 2 * Path(source.location).stat().st_size
    cfg = offline_config(source)
    if cfg is not None:
        return config_parameters(cfg)
    match = HUB_SIZE.search(source.location.rsplit("/", 1)[-1]) if source.form == "hub" else None
    if match:
        return int(float(match.group(1)) * (1e9 if match.group(2) == "B" else 1e6))
    return None


@dataclass(frozen=True)
class Shape:
    """The sizes of a decoder-only transformer that its memory depends on."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False

    @classmethod
    def of(cls, cfg: dict) -> "Shape | None":
        """From a config.json dict (a composite model's ``text_config``); None if it lacks a size."""
        cfg = cfg.get("text_config") or cfg
        try:
            hidden, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
            vocab, inner = cfg["vocab_size"], cfg["intermediate_size"]
        except KeyError:
            return None
        heads = cfg.get("num_attention_heads") or 1
        return cls(layers=layers, hidden=hidden, intermediate=inner, heads=heads,
                   kv_heads=cfg.get("num_key_value_heads") or heads,
                   head_dim=cfg.get("head_dim") or hidden // heads, vocab=vocab,
                   tied=bool(cfg.get("tie_word_embeddings")))

    @property
    def parameters(self) -> int:
        attention = 2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = 3 * self.hidden * self.intermediate  # gated MLP (Llama, Qwen, SmolLM)
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * (attention + mlp + 2 * self.hidden) + self.hidden + embeddings  # + the final norm


@dataclass(frozen=True)
class Pass:
    """One forward pass of an evaluation job: ``rows`` rows of ``context`` tokens, ``generation``
    new tokens decoded after them (0 for log-likelihood tasks), logits kept at ``kept`` positions
    (None: every position, lm-eval's plain pass)."""

    rows: int
    context: int
    generation: int = 0
    kept: int | None = None


@dataclass(frozen=True)
class Estimate:
    """Bytes of each part of a pass's peak (see the module)."""

    weights: int
    kv_cache: int
    logits: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.logits + self.activations

    def describe(self) -> str:
        parts = ", ".join(f"{name.replace('_', ' ')} {getattr(self, name) / GIB:.1f}"
                          for name in ("weights", "kv_cache", "logits", "activations"))
        return f"{self.total / GIB:.1f} GiB ({parts})"


def estimate(shape: Shape, dtype: str, step: Pass) -> Estimate:
    """The peak memory of one pass of ``step`` through a model of ``shape`` in ``dtype``."""
    size = DTYPE_BYTES[dtype]
    tokens = step.context + step.generation
    kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * step.rows * tokens * size if step.generation else 0
    kept = 1 if step.generation else (step.context if step.kept is None else min(step.kept, step.context))
    logits = 2 * step.rows * kept * shape.vocab * size  # the logits and their log-softmax
    activations = step.rows * step.context * (3 * shape.intermediate + 6 * shape.hidden) * size
    return Estimate(shape.parameters * size, kv, logits, activations)


def rows_that_fit(shape: Shape, dtype: str, step: Pass, memory: int, *, most: int = 4096) -> int:
    """The most rows (at most ``most``) whose pass fits in ``memory`` bytes; 0 if the weights alone
    do not fit."""
    def fits(rows: int) -> bool:
        return estimate(shape, dtype, Pass(rows, step.context, step.generation, step.kept)).total <= memory

    if not fits(1):
        return 0
    low, high = 1, most
    while low < high:  # the largest row count that fits: the estimate grows with rows
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def gpu_memory() -> list[int]:
    """Total memory in bytes of each GPU that ``nvidia-smi`` lists on this machine; [] without one.

    Read without torch (the config check runs at parse time, often on a machine that evaluates
    nothing); ``CUDA_VISIBLE_DEVICES`` is not applied: the check is about the machine's cards.
    """
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(float(line)) * 1024**2 for line in out.split() if line.strip()]
