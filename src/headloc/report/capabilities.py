"""Which capability each task measures, to label the rows of the tables and figures.

The run's ``capabilities`` come first, then the evaluations frame's own ``task``/``capability`` and
``eval_task``/``eval_capability`` columns; a task in neither is its own capability. A question of
names, not of a frame's shape, so it stands apart from the checks of :mod:`headloc.report.frames`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from headloc.report.frames import is_blank


def capability_map(evals: pd.DataFrame, capabilities: Mapping[str, str] | None = None) -> dict:
    """task -> capability: ``capabilities`` first, then the frame's own capability columns.

    Both ``task``/``capability`` and ``eval_task``/``eval_capability`` pairs are read; blank
    cells (rows of shared heads) are skipped. A task in neither is absent (see
    :func:`capabilities_of`).

    Examples
    --------
    >>> evals = pd.DataFrame({"task": ["gsm8k", ""], "capability": ["math", ""],
    ...                       "eval_task": ["gsm8k", "boolq"],
    ...                       "eval_capability": ["math", "general"]})
    >>> capability_map(evals, {"boolq": "reading"})
    {'gsm8k': 'math', 'boolq': 'reading'}
    """
    mapping: dict[str, str] = {}
    for task_col, cap_col in (("task", "capability"), ("eval_task", "eval_capability")):
        if task_col in evals.columns and cap_col in evals.columns:
            for task, cap in zip(evals[task_col], evals[cap_col]):
                if not is_blank(task) and not is_blank(cap):
                    mapping.setdefault(task, cap)
    mapping.update(capabilities or {})
    return mapping


def capabilities_of(tasks: Iterable[str], mapping: Mapping[str, str]) -> list[str]:
    """The capability of each task; a task the mapping lacks is its own capability.

    Examples
    --------
    >>> capabilities_of(["gsm8k", "swear"], {"gsm8k": "math"})
    ['math', 'swear']
    """
    return [mapping.get(task, task) for task in tasks]
