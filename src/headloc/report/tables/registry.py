"""What every table module shares: the registry its specs join, the row of each run at k, a mean
that skips blanks, a head list read from any form."""

from __future__ import annotations

import numpy as np
import pandas as pd

from headloc.heads import HEAD_PATTERN
from headloc.report.spec import TableSpec


BASELINE = "BL"
KNOWLEDGE_AVG = "knowledge_mc_avg"
OTHER_AVG = "other_avg"

SPECS: dict[str, TableSpec] = {}
"""Every table's spec by name, as each module adds it next to its builder (headloc.report.tables
puts them in paper order and marks the ones that list a search's heads)."""


def add(spec: TableSpec) -> None:
    if spec.name in SPECS:
        raise ValueError(f"table {spec.name!r} is described twice")
    SPECS[spec.name] = spec


def at_k(d: pd.DataFrame, k: int) -> pd.DataFrame:
    """Each run's row at ``min(k, largest k evaluated)``."""
    largest = d.groupby(["model", "task", "search"])["k"].transform("max")
    return d[d["k"] == np.minimum(largest, k)].reset_index(drop=True)


def mean(values) -> float:
    values = [v for v in values if not pd.isna(v)]
    return float(np.mean(values)) if values else np.nan


def head_list(value) -> list[str]:
    """Top heads as a list, from a list/array or from a string such as "L1H2, L3H4"."""
    if isinstance(value, str):
        return [match.group(0) for match in HEAD_PATTERN.finditer(value)]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(head) for head in value]
