"""One search in one process, by the method's kind, with the calls the workflow's rules make.

The workflow spreads a search over jobs (make_masks, score_masks, refine_masks, greedy's rounds,
gradient_search) and hands their files to rule recover_heads. :func:`drive` makes the same calls
in the same order, with a ``score`` function in place of the scoring jobs, and writes the files
``Method.recover`` reads: benchmarks/ground_truth.py and the method contract test run every method
this way, without Snakemake.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from headloc.io import read_scores, save_npy, write_json, write_table
from headloc.methods import make_masks


def drive(method, score, names: list[str], folder, *, budget: int = 0, seed: int = 0, k: int = 1,
          sparsity: float = 0.05, alpha: float = 0.001, gradient: tuple | None = None,
          higher_is_better: bool = True) -> dict:
    """Run ``method`` (a registered :class:`~headloc.methods.Method`) and return the inputs rule
    recover_heads would give ``method.recover``; their files are written under ``folder``.

    ``score`` maps masks (rows x heads, 1 = ablated) to one score per row. ``budget`` is a mask
    design's size, ``k`` greedy's number of rounds and cs_adaptive's top k; ``gradient`` is
    ``(model, examples, options)`` for a gradient method (examples as
    :class:`headloc.engine.supervision.Example`, options its config section). ``higher_is_better``
    is the scored metric's direction (False: a perplexity): the score tables say it, as the scoring
    jobs' do, and every ranking follows it (:func:`headloc.io.read_scores`).
    """
    folder = Path(folder)
    if method.kind == "masks":
        masks = make_masks(len(names), budget, method=method.name, sparsity=sparsity, random_state=seed)
        y = score(masks)
        inputs = dict(zip(("masks", "scores"), _scored(folder, "masks", masks, y, higher_is_better)))
        if method.stages == 2:  # rule refine_masks, then stage 2's scoring
            from headloc.search.adaptive import refine, stage_sizes

            plan = refine(masks, read_scores(inputs["scores"])["score"].to_numpy(), k=k, n_rows=stage_sizes(budget)[1], alpha=alpha, random_state=seed)
            if len(plan.masks):
                inputs.update(zip(("stage2_masks", "stage2_scores"),
                                  _scored(folder, "stage2", plan.masks, score(plan.masks), higher_is_better)))
        return inputs
    if method.kind == "rounds":
        from headloc.methods.greedy import choose_round
        from headloc.search.greedy import round_masks

        record, rounds = None, []
        for r in range(1, k + 1):
            chosen = [names.index(h) for h in (record or {"chosen": []})["chosen"]]
            masks = round_masks(len(names), chosen)
            _, scores = _scored(folder, f"round{r}", masks, score(masks), higher_is_better)
            record = choose_round(record, masks, read_scores(scores)["score"].to_numpy(), names)
            write_json(folder / f"round{r}.json", record)
            rounds.append(str(folder / f"round{r}.json"))
        return {"rounds": rounds}
    if method.kind == "gradient":
        import torch

        from headloc.engine.supervision import recovery_fields

        model, examples, options = gradient
        torch.manual_seed(seed)
        fields = recovery_fields(method.run(model, examples, {**method.defaults, **options}, seed, 256))
        write_json(folder / "gradient.json", {"method": method.name, "n_docs": len(examples), **fields})
        return {"gradient": str(folder / "gradient.json")}
    return {"model": []}  # a draw evaluates nothing


def _scored(folder: Path, name: str, masks, scores, higher_is_better: bool) -> tuple[str, list[str]]:
    """A design and its scores as rule score_masks leaves them: masks.npy, one table of scores."""
    save_npy(folder / f"{name}.npy", masks)
    write_table(folder / f"{name}.tsv", pd.DataFrame({"mask": np.arange(len(masks)), "score": scores,
                                                      "higher_is_better": higher_is_better}))
    return str(folder / f"{name}.npy"), [str(folder / f"{name}.tsv")]
