"""Delta Task and Delta Gen of a located search's top heads on full documents (Table 2's two numbers),
each task's change in its own unit: :meth:`headloc.api.located.Located.validate`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from headloc.api.running import evaluation_mode, quiet
from headloc.api.tasks import Task, count_documents, mask_scorer, resolve_task
from headloc.heads import headset_mask


def direction_words(higher_is_better: bool) -> str:
    return "higher is better: a drop is damage" if higher_is_better else "lower is better: a rise is damage"


def change_words(unit: str, metric: str | None) -> str:
    """What a change in ``unit`` (:func:`headloc.data.units.display_score`'s) is a change of."""
    name = metric.split(",")[0] if metric else "score"
    return {"points": f"percentage points of {name}", "relative": f"% of the unablated {name}",
            "own": name}[unit]


def _number(value, sign: str = "+") -> str:
    value = float(value) + 0.0  # the Lasso's -0.0 reads as 0.0
    return f"{value:{sign},.1f}" if abs(value) >= 10 or value == 0 else f"{value:{sign}.4g}"


@dataclass(repr=False)
class Validation:
    """Delta Task and Delta Gen of ablating the top ``k`` heads, each task's change in its own unit as
    Table 2 shows it (``unit``: percentage points for a fraction metric, percent of the unablated score
    for a task named relative, else the metric's own unit, e.g. a perplexity).

    ``delta_task``: the searched task's change, and ``delta_gen``: the mean change of the other
    tasks, each signed as Table 2 signs them, so that negative is damage (a lower-is-better task's
    change negated: a perplexity that rises by 925.6 gives -925.6). ``scores``: each task's metric
    unablated (``clean``) and ablated, its ``unit``, direction and ``delta``, the change as measured
    (that perplexity's +925.6)."""

    k: int
    heads: list
    delta_task: float
    delta_gen: float
    scores: object  # pandas DataFrame: task, metric, unit, higher_is_better, n_docs, clean, ablated, delta

    def __repr__(self) -> str:
        first = self.scores.iloc[0]
        lines = [f"Validation of the top {self.k} heads: {', '.join(self.heads)}",
                 f"Delta Task {_number(self.delta_task)} {change_words(first['unit'], first['metric'])} "
                 "(signed so that negative is damage)"]
        if len(self.scores) > 1:
            others = len(self.scores) - 1
            lines.append(f"Delta Gen {_number(self.delta_gen)} (mean over {others} other task{'s' * (others > 1)}, "
                         "each signed so that negative is damage)")
        for row in self.scores.itertuples():
            lines.append(f"  {row.task}: {_number(row.clean, '')} -> {_number(row.ablated, '')}, "
                         f"{_number(row.delta)} {change_words(row.unit, row.metric)} "
                         f"({direction_words(row.higher_is_better)})")
        return "\n".join(lines)


def validate_top_heads(record: dict, task: Task, model, tokenizer, *, k, tasks, documents, units: Mapping | None,
                       batch_size: int, progress: bool) -> Validation:
    """The top ``k`` of the search ``record``'s ranking ablated on ``task``'s full documents and on each
    of ``tasks`` (:meth:`headloc.api.located.Located.validate` says what each argument means and holds
    the defaults)."""
    import pandas as pd

    ranking = list(record["ranking"])
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(ranking):
        raise ValueError(f"k must be an integer from 1 to {len(ranking)} (the model's heads), got {k!r}")
    chosen = documents if isinstance(documents, dict) else {task.name: documents}
    named = [(task.name, full_task(task, chosen.get(task.name)))]
    named += [(name, other_task(task, other, chosen.get(name))) for name, other in _named(tasks)]
    shown = _units(units, named)
    heads = ranking[:k]
    mask = headset_mask(heads, record["n_layers"], record["n_heads"])
    with evaluation_mode(model), quiet(task):
        frame = pd.DataFrame([{"task": name, **_score(each, mask, shown[name], model, tokenizer, batch_size, progress)}
                              for name, each in named])
    signed = frame["delta"].where(frame["higher_is_better"], -frame["delta"])  # negative: damage (Table 2)
    gen = signed.iloc[1:]
    return Validation(k=k, heads=heads, delta_task=float(signed.iloc[0]),
                      delta_gen=float(gen.mean()) if len(gen) else float("nan"), scores=frame)


def full_task(task: Task, documents) -> Task:
    """The searched task without the search's documents: all of the task's, or those asked for."""
    from dataclasses import replace

    from headloc.api.tasks import choose_documents

    if task.callable:
        return task
    spec = task.spec
    kwargs = {key: value for key, value in spec.dataset_kwargs.items() if key != "data_file"}
    full = replace(spec, doc_ids=None, dataset_kwargs=kwargs)
    return replace(task, spec=choose_documents(full, documents))


def other_task(task: Task, other, documents) -> Task:
    """Another task to validate on, read as the searched one was (chat, task folders)."""
    if callable(other):
        return resolve_task(other)
    if task.callable:
        raise ValueError(f"validate(tasks=...) of a callable task takes callables, got {other!r}")
    return resolve_task(other, chat=task.spec.chat, documents=documents, include_path=task.task_folders[1:])


def _score(task: Task, mask, unit: str, model, tokenizer, batch_size, progress) -> dict:
    """The task unablated and with ``mask`` ablated, and the change in ``unit``."""
    from headloc.data.units import change

    score = mask_scorer(task, model, tokenizer, batch_size=batch_size, masks_per_pass=1, progress=progress)
    clean, ablated = score(np.vstack([np.zeros_like(mask), mask]), desc=f"validate {task.name}")
    try:
        delta = change(ablated, clean, unit)
    except ValueError as error:  # a non-fraction shown in points
        raise ValueError(f"task {task.name!r}: {error}; show it in another unit, e.g. "
                         f"units={{{task.name!r}: 'own'}}") from None
    return {"metric": None if task.callable else task.spec.metric_key, "unit": unit,
            "higher_is_better": task.higher_is_better, "n_docs": count_documents(task), "clean": clean,
            "ablated": ablated, "delta": delta}


def _units(units: Mapping | None, named: list) -> dict[str, str]:
    """Each validated task's display unit: ``units``' where given, else points for a fraction metric
    and the metric's own unit otherwise (a callable's score, whose metric headloc cannot know)."""
    from headloc.data.units import UNITS, display_unit

    units = dict(units or {})
    names = [name for name, _ in named]
    for name, unit in units.items():
        if name not in names:
            raise ValueError(f"units names task {name!r}, which is not validated; the tasks are {', '.join(names)}")
        if unit not in UNITS:
            raise ValueError(f"units[{name!r}] is {unit!r}; expected one of {', '.join(UNITS)}")
    return {name: units.get(name) or ("own" if task.callable else display_unit(task.spec.metric))
            for name, task in named}


def _named(tasks):
    """``tasks`` as (name, task) pairs: a dict's items, else each task named by itself."""
    if isinstance(tasks, dict):
        return list(tasks.items())
    if isinstance(tasks, (str, Path)) or callable(tasks):
        tasks = [tasks]
    return [(getattr(t, "__name__", str(t)), t) for t in tasks]
