"""One search in one process: the steps of :mod:`headloc.methods.steps` that the workflow's rules
run, in the rules' order, with a ``score`` function in place of the scoring jobs.

The workflow spreads a search over jobs (make_masks, score_masks, refine_masks, greedy's rounds,
gradient_search, sequential_search, recover_heads), each a script that makes one step's call. :func:`drive` makes the
same calls, writing the same files under one folder; headloc.locate, benchmarks/ground_truth.py and
the method contract test run every method this way, without Snakemake.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import write_json
from headloc.methods import steps
from headloc.methods.settings import SearchSettings

LOG = logging.getLogger("headloc.methods")
GRADIENT_BATCH = 256  # rows per forward pass of a gradient method: memory only, not the result


def drive(method, score, geometry: HeadGeometry, folder, settings: SearchSettings | None = None, *,
          gradient: tuple | None = None, universal: Sequence[str] = (), higher_is_better: bool = True,
          log=LOG) -> dict:
    """Run ``method`` (a registered :class:`~headloc.methods.Method`) by its kind and recover its
    ranking; return recovery.json as rule recover_heads writes it, less the search's identity
    (model, task, search). The steps' files are written under ``folder``.

    ``score`` maps masks (rows x heads, 1 = ablated) to one score per row; ``higher_is_better`` is
    its metric's direction (False: a perplexity), written beside the scores as the scoring jobs do.
    ``settings``: the search keys and the method's options (:class:`SearchSettings`, whose defaults
    are the workflow's): ``n_masks`` is a mask design's size or a sequential search's cap (the
    unablated row included), ``top_k`` greedy's rounds and cs_adaptive's target. ``gradient`` is
    ``(model, examples)`` for a gradient method (examples as
    :class:`headloc.engine.supervision.Example`). ``universal``: heads greedy's rounds leave out,
    as with ``universal.filter`` on.
    """
    s = settings or SearchSettings()
    run = _Run(score, geometry, Path(folder), higher_is_better, log)
    options = s.options_of(method)
    if method.kind == "masks":
        refinement = steps.RefineParams(s.n_masks, s.top_k, s.alpha, s.seed) if method.stages == 2 else None
        inputs = run.masks(steps.DesignParams(method.name, s.n_masks, s.sparsity, s.seed), refinement)
    elif method.kind == "rounds":
        inputs = run.rounds(s.top_k, universal)
    elif method.kind == "gradient":
        model, examples = gradient
        inputs = run.gradient(steps.GradientParams(method.name, s.seed, options), model, examples)
    elif method.kind == "sequential":
        inputs = run.sequential(steps.SequentialParams(method.name, s.n_masks, s.seed, s.top_k, s.sparsity, options,
                                                       higher_is_better))
    else:
        inputs = steps.RecoverInputs()  # a draw evaluates nothing
    recovery = steps.RecoverParams(method.name, s.alpha, s.seed, s.top_k, higher_is_better)
    return steps.recover(recovery, inputs, geometry, log)


@dataclass(frozen=True)
class _Run:
    """One driven search: where its files go, and how its masks are scored."""

    score: Callable
    geometry: HeadGeometry
    folder: Path
    higher_is_better: bool
    log: logging.Logger

    def masks(self, design: steps.DesignParams, refinement: steps.RefineParams | None) -> steps.RecoverInputs:
        """Steps design and, for a two-stage design, refine, each design scored."""
        masks = self.folder / "masks.npy"
        scored = self.scored(steps.design(design, self.geometry, masks, self.log), "masks")
        if refinement is None:
            return steps.RecoverInputs(masks=str(masks), scores=scored)
        stage2 = self.folder / "stage2.npy"
        stage2_masks = steps.refine(refinement, self.geometry, str(masks), scored, masks_out=stage2,
                                    plan_out=self.folder / "refinement.json", log=self.log)
        return steps.RecoverInputs(masks=str(masks), scores=scored, stage2_masks=str(stage2),
                                   stage2_scores=self.scored(stage2_masks, "stage2"))

    def rounds(self, k: int, universal: Sequence[str]) -> steps.RecoverInputs:
        """Greedy's ``k`` rounds: steps round_masks and choose_head, each round's masks scored."""
        heads = None
        if universal:
            heads = self.folder / "universal.json"
            write_json(heads, {"heads": list(universal)})
        rounds = []
        for r in range(1, k + 1):
            masks, chosen = self.folder / f"round{r}.npy", self.folder / f"round{r}.json"
            previous = rounds[-1] if rounds else None
            scored = self.scored(steps.round_masks(self.geometry, previous, heads, masks, self.log), f"round{r}")
            steps.choose_head(r, self.geometry, str(masks), scored, previous, heads, chosen, self.log)
            rounds.append(str(chosen))
        return steps.RecoverInputs(rounds=rounds)

    def gradient(self, params: steps.GradientParams, model, examples) -> steps.RecoverInputs:
        """Step gradient."""
        result = self.folder / "gradient.json"
        steps.gradient(params, model, examples, GRADIENT_BATCH, result, self.log)
        return steps.RecoverInputs(gradient=str(result))

    def sequential(self, params: steps.SequentialParams) -> steps.RecoverInputs:
        """Step sequential, scoring each round with ``score``; its record lies beside its result."""
        result = self.folder / "sequential.json"
        steps.sequential(params, self.geometry, self.score, self.folder / "record.npz", result, self.log)
        return steps.RecoverInputs(sequential=str(result))

    def scored(self, masks: np.ndarray, name: str) -> list[str]:
        """Score ``masks`` and write their table as rule score_masks does (no rows: nothing to
        score, an empty table); the table's path, as a design's list of chunk tables."""
        import pandas as pd

        from headloc.io import write_table

        scores = self.score(masks) if len(masks) else []
        table = self.folder / f"{name}.tsv"
        write_table(table, pd.DataFrame({"mask": np.arange(len(masks)), "score": scores,
                                         "higher_is_better": self.higher_is_better}))
        return [str(table)]
