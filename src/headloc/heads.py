"""Head names and head sets.

A head is written ``L{layer}H{head}``, zero-based, without leading zeros, everywhere: files, JSON,
tables, logs and config (``L01H05`` is refused: :func:`parse_head`).
A head set is the sorted ``+``-joined spelling of its heads (``L15H13+L16H21``), or ``none`` for
the unablated model, so that every table asking for "model X, task T, heads H" shares one file.
Inside the library a head is a flat index ``layer * n_heads + head`` into a mask row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

HEAD_PATTERN = re.compile(r"L(\d+)H(\d+)")
HEADSET_PATTERN = r"none|L\d+H\d+(\+L\d+H\d+)*"
NO_HEADS = "none"
TOP_K = 5  # validation.top_k's default: the heads a search names and validates (its one home)
# models.<name>.batch_size and masks_per_pass's defaults (rows per forward pass; masks sharing one),
# read by the schema's test, headloc.locate and the evaluation engine alike
BATCH_SIZE, MASKS_PER_PASS = 16, 8


def format_head(layer: int, head: int) -> str:
    """``(15, 13) -> 'L15H13'``."""
    return f"L{int(layer)}H{int(head)}"


def parse_head(name: str) -> tuple[int, int]:
    """``'L15H13' -> (15, 13)``; raises ValueError naming the bad spelling.

    One head has one spelling, the one headloc writes (:func:`format_head`): a name compared as text
    (a universal head left out of a ranking, a head set's file) must be that spelling, so
    ``L01H05`` is refused, naming ``L1H5``, rather than read as L1H5 in one place and missed in another.

    >>> parse_head("L01H05")
    Traceback (most recent call last):
    ValueError: bad head name 'L01H05': write it 'L1H5' (L<layer>H<head>, zero-based, without leading zeros)
    """
    match = HEAD_PATTERN.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"bad head name {name!r}: expected L<layer>H<head>, e.g. 'L15H13'")
    layer, head = int(match.group(1)), int(match.group(2))
    if format_head(layer, head) != name:
        raise ValueError(f"bad head name {name!r}: write it {format_head(layer, head)!r} (L<layer>H<head>, "
                         "zero-based, without leading zeros)")
    return layer, head


def head_name(index: int, n_heads: int) -> str:
    """Flat index -> name, for a model with ``n_heads`` heads per layer."""
    return format_head(*divmod(int(index), n_heads))


def head_index(name: str, n_layers: int, n_heads: int) -> int:
    """Name -> flat index; raises ValueError if the head is outside the model."""
    layer, head = parse_head(name)
    if layer >= n_layers or head >= n_heads:
        raise ValueError(
            f"head {name} is outside the model: layers 0..{n_layers - 1}, heads 0..{n_heads - 1}"
        )
    return layer * n_heads + head


def headset_mask(heads: Iterable[str], n_layers: int, n_heads: int) -> np.ndarray:
    """A mask over all heads (1 = ablated) with exactly ``heads`` set; raises for heads outside the model."""
    mask = np.zeros(n_layers * n_heads, dtype=np.int8)
    for head in heads:
        mask[head_index(head, n_layers, n_heads)] = 1
    return mask


def format_headset(heads: Iterable[str]) -> str:
    """Canonical spelling of a set of heads: sorted by (layer, head), '+'-joined, 'none' if empty."""
    unique = sorted(set(heads), key=parse_head)
    return "+".join(unique) if unique else NO_HEADS


def parse_headset(spelling: str) -> list[str]:
    """Inverse of :func:`format_headset`; ``'none' -> []``."""
    if spelling == NO_HEADS:
        return []
    heads = spelling.split("+")
    for head in heads:
        parse_head(head)
    return heads


@dataclass(frozen=True)
class HeadGeometry:
    """How many layers and query heads per layer a model has (no torch needed)."""

    n_layers: int
    n_heads: int

    @property
    def total(self) -> int:
        return self.n_layers * self.n_heads

    @property
    def names(self) -> list[str]:
        """Every head's name, in flat index order (a mask row's columns).

        >>> HeadGeometry(2, 2).names
        ['L0H0', 'L0H1', 'L1H0', 'L1H1']
        """
        return [head_name(i, self.n_heads) for i in range(self.total)]

    @classmethod
    def of(cls, config) -> "HeadGeometry":
        """From a transformers config (every architecture headloc ablates: headloc.model.architectures)."""
        config = getattr(config, "get_text_config", lambda: config)()
        return cls(int(config.num_hidden_layers), int(config.num_attention_heads))
