"""One search in one process: the steps the workflow's rules run, in the rules' order, with a
``score`` function in place of the scoring jobs.

The workflow spreads a search over jobs (make_masks, score_masks, refine_masks, greedy's rounds,
search_job, recover_heads), each a script that makes one step's call.
:func:`drive` has the method's kind make the same calls (:meth:`headloc.methods.kinds.Kind.drive`),
writing the same files under one folder, laid out as a workflow's search folder
(:class:`~headloc.methods.kinds.SearchFiles`); headloc.locate, benchmarks/ground_truth.py and the
method contract test run every method this way, without Snakemake.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import write_json
from headloc.methods import steps
from headloc.methods.kinds import SearchFiles
from headloc.methods.settings import SearchSettings, SearchSpec

LOG = logging.getLogger("headloc.methods")
BATCH = 256  # rows per gradient pass where the caller gives none: memory only, not the result


def drive(method, score, geometry: HeadGeometry, folder, settings: SearchSettings | None = None, *,
          gradient: tuple | None = None, universal: Sequence[str] = (), higher_is_better: bool = True,
          log=LOG) -> dict:
    """Run ``method`` (a registered :class:`~headloc.methods.Method`) by its kind and recover its
    ranking; return recovery.json as rule recover_heads writes it, less the search's identity
    (model, task, search). The steps' files are written under ``folder``.

    ``score`` maps masks (rows x heads, 1 = ablated) to one score per row, or to a
    :class:`headloc.io.Scored` with the rows' per-document scores too (the evidence
    of each head is drawn from those: :mod:`headloc.search.evidence`); ``higher_is_better`` is
    its metric's direction (False: a perplexity), written beside the scores as the scoring jobs do.
    ``settings``: the search keys and the method's options (:class:`SearchSettings`, whose defaults
    are the workflow's): ``n_masks`` is a mask design's size or a sequential search's cap (the
    unablated row included), ``top_k`` greedy's rounds and cs_adaptive's target. ``gradient`` is
    ``(model, examples)`` for a gradient method (examples as
    :class:`headloc.engine.supervision.Example`). ``universal``: heads greedy's rounds leave out,
    as with ``universal.filter`` on.
    """
    search = SearchSpec(method, settings or SearchSettings(), higher_is_better)
    job = Job(score, geometry, SearchFiles(str(folder)), higher_is_better, log, gradient, tuple(universal))
    inputs = method.kind.drive(search, job)
    return steps.recover(method.kind.params("recover", search), inputs, geometry, log)


@dataclass(frozen=True)
class Job:
    """One driven search, as a kind's steps see it: how its masks are scored, its model's heads,
    where its files go, the scored metric's direction, its log; the model and gold continuations of
    a gradient search, the heads greedy's rounds leave out, the rows per gradient pass (memory
    only) and what a one-job search's record depends on beyond its parameters
    (:func:`headloc.methods.record.record_key`; empty in one process, whose inputs do not change)."""

    score: Callable
    geometry: HeadGeometry
    files: SearchFiles
    higher_is_better: bool
    log: logging.Logger
    gradient: tuple | None = None
    universal: tuple[str, ...] = ()
    batch_size: int = BATCH
    key: str = ""

    def scored(self, masks: np.ndarray, stage: str = "") -> list[str]:
        """Score ``masks`` and write their table and per-document scores as one scoring job of rule
        score_masks does (no rows: nothing to score, an empty table); the table's path, as a stage's
        list of tables."""
        from headloc.io import write_scores
        from headloc.io import Scored

        found = Scored.of(self.score(masks) if len(masks) else [])
        table = self.files.score_table(stage)
        write_scores(table, self.files.samples(stage), np.arange(len(masks)), found, self.higher_is_better)
        return [table]

    def universal_file(self) -> str | None:
        """The universal heads as a file (rule universal_heads writes one per model), or None."""
        if not self.universal:
            return None
        path = self.files.path("universal.json")
        write_json(path, {"heads": list(self.universal)})
        return path
