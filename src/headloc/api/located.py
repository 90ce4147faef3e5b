"""One search's result as :func:`headloc.locate` returns it: the ``recovery.json`` record the
workflow would write, its heads with their evidence, and ways to use it (heatmap, tidy table, saved
folder, validation on full documents)."""

from __future__ import annotations

import base64
import html
import io
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from headloc import methods
from headloc.api.tasks import Task
from headloc.api.validation import Validation, validate_top_heads
from headloc.heads import BATCH_SIZE
from headloc.io import write_json


@dataclass(repr=False)
class Located:
    """One search's result: the ``recovery.json`` record the workflow would write, and ways to use it.
    In a notebook it shows itself as its top heads, their values and its heatmap."""

    record: dict
    parameters: dict
    task: Task
    model: object
    tokenizer: object
    batch_size: int = BATCH_SIZE
    work: object = None  # the driver's files (masks, scores, rounds)

    @property
    def ranking(self) -> list[str]:
        return list(self.record["ranking"])

    @property
    def values(self) -> dict:
        """Head -> the method's per-head value (what it means: :attr:`label`)."""
        return dict(self.record["coef"])

    @property
    def label(self) -> str:
        """What :attr:`values` mean: the method's label, and for a lower-is-better metric that the
        values are of the negated metric (the searches rank by it), so that its rise shows as a drop."""
        label = methods.get(self.record["method"]).label
        if self.record.get("higher_is_better") is False:
            metric = (self.parameters.get("metric") or "the score").split(",")[0]
            label += (f", of -{metric} ({metric} is lower-is-better: a rise is damage, and shows here as "
                      "a negative change)")
        return label

    @property
    def warnings(self) -> list[str]:
        """What the search says its result lacks (e.g. a cap reached before its top k was confirmed)."""
        return list(self.record.get("warnings", []))

    @property
    def top_heads(self) -> list[str]:
        return list(self.record["top_heads"])

    @property
    def found(self) -> list[str] | None:
        """The heads found above the noise, most damaging first (:mod:`headloc.search.evidence`): empty
        when none was (:attr:`no_head_found` says why), None when the search assessed none."""
        found = self.record.get("found")
        return None if found is None else list(found)

    @property
    def no_head_found(self) -> str:
        """Why no head was found above the noise, or why none was assessed; empty when one was found."""
        return self.record.get("no_head_found", "")

    @property
    def intervals(self) -> dict:
        """Head -> the 95 % interval of its value under document resampling, [low, high]; None where it
        has none (an unmeasured head, a search that assessed none)."""
        return dict(self.record.get("interval") or {})

    @property
    def n_evals(self) -> int:
        return self.record["n_evals"]

    @property
    def search_id(self) -> str:
        """The search's id: the directory name the workflow would give the same search."""
        return self.record["search"]

    SHOWN = 10  # top heads a repr lists

    def _top(self) -> list[tuple[str, str]]:
        """The first :attr:`SHOWN` top heads and their values as text, each with its 95 % interval and
        P(top k) where it has them."""
        from headloc.search.evidence import head_evidence

        shown = []
        for head in self.top_heads[: self.SHOWN]:
            value, interval, p = head_evidence(self.record, head, value_digits=4)
            shown.append((head, " ".join([value, *([interval] if interval else []), *([f"P {p}"] if p else [])])))
        return shown

    @property
    def evidence(self) -> str:
        """One line: the heads found above the noise, or "no head found above noise" and why."""
        if self.found is None:
            return f"evidence: {self.no_head_found or 'not assessed'}"
        if not self.found:
            return f"no head found above noise: {self.no_head_found}"
        return f"found above noise: {', '.join(self.found)}"

    def _title(self) -> str:
        return (f"{self.record['method']} on {self.record['task']} (model {self.record['model']}): "
                f"{self.n_evals} evaluations, search {self.search_id}")

    def __repr__(self) -> str:
        more = len(self.top_heads) - self.SHOWN
        top = ", ".join(f"{head} {value}" for head, value in self._top()) + (f", ... {more} more" if more > 0 else "")
        lines = [f"<Located {self._title()}>", self.evidence, f"top {len(self.top_heads)}: {top}",
                 f"value: {self.label} [95 % interval over resampled documents] P(in the top k)"]
        lines += [f"warning: {_cut(warning, 200)}" for warning in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A notebook's view: the same facts, every warning, and the heatmap as an inline PNG."""
        buffer = io.BytesIO()
        self.heatmap().savefig(buffer, format="png")
        png = base64.b64encode(buffer.getvalue()).decode("ascii")
        rows = "".join(f"<tr><td>{rank}</td><td>{html.escape(head)}</td><td>{value}</td></tr>"
                       for rank, (head, value) in enumerate(self._top(), 1))
        warned = "".join(f"<li>warning: {html.escape(warning)}</li>" for warning in self.warnings)
        return (f"<div><p><b>Located</b> {html.escape(self._title())}</p><p>{html.escape(self.evidence)}</p>"
                f"<p>value: {html.escape(self.label)}</p>"
                f"<table><tr><th>rank</th><th>head</th><th>value</th></tr>{rows}</table>"
                + (f"<ul>{warned}</ul>" if warned else "")
                + f'<img alt="heatmap of {html.escape(self.search_id)}" src="data:image/png;base64,{png}"/></div>')

    def heatmap(self):
        """The workflow's heatmap of this search (a matplotlib Figure)."""
        from headloc.report.heatmap import heatmap_figure

        return heatmap_figure(self.record, top_k=len(self.top_heads))

    def to_frame(self):
        """The tidy table: model, task, search, head, layer, index, value, rank."""
        from headloc.report.export import tidy_frame

        return tidy_frame([self.record])

    def save(self, folder, *, mib_task: str | None = None, mib_model: str | None = None) -> Path:
        """Write what the workflow's search folder holds (recovery.json, heatmap.png, the masks,
        scores or rounds the search made) and the exports: heads.csv and ``mib/``, a MIB submission
        of this search (``mib/<task>_<model>/importances.json`` and ``mib/headloc.tsv``), its folder
        named by MIB's task and model names when given (``mib_task="ioi"``, ``mib_model="gpt2"``),
        else by this search's; return the folder."""
        from headloc.report.export import mib_cfg, write_submission, write_tidy
        from headloc.report.heatmap import save_heatmap

        if self.model is None:
            raise ValueError("save() needs the searched model (Located.model): MIB's graph config is read from it")
        folder, record = Path(folder), self.record
        if self.work is not None:
            shutil.copytree(self.work.name, folder, dirs_exist_ok=True)
        write_json(folder / "recovery.json", record)
        save_heatmap(record, folder / "heatmap.png", top_k=len(self.top_heads), format="png")
        write_tidy(folder / "heads.csv", [record])
        write_submission(folder / "mib", [record], {record["model"]: mib_cfg(self.model.config)},
                         tasks={record["task"]: mib_task} if mib_task else None,
                         models={record["model"]: mib_model} if mib_model else None)
        return folder

    def validate(self, tasks=(), *, k: int | None = None, documents=None, units: Mapping | None = None,
                 progress: bool = True) -> Validation:
        """Ablate the top ``k`` heads (default: the top k of the search) and score the searched task
        on all its documents and each of ``tasks`` (lm-eval names or YAML paths, or a dict
        name -> task; a callable task's are callables): Delta Task is the first, Delta Gen the
        mean of the others (see :class:`~headloc.api.validation.Validation`). ``documents``
        restricts the searched task's documents (as :func:`~headloc.api.locator.locate`'s), or is
        a dict task name -> documents for any of them. ``units``: task name -> how its change is
        shown, ``"points"``, ``"relative"`` (percent of its unablated score, as the workflow's
        ``tasks.<name>.relative``) or ``"own"``; by default percentage points for a fraction metric
        (accuracy, exact match, ...), else its own unit (a callable's score included)."""
        return validate_top_heads(self.record, self.task, self.model, self.tokenizer,
                                  k=len(self.top_heads) if k is None else k, tasks=tasks, documents=documents,
                                  units=units, batch_size=self.batch_size, progress=progress)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
