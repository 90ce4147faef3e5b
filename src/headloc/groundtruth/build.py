"""Build a planted model: word-level tokenizer, Llama architecture, CPU training, save_pretrained.

How heads are planted (docs/ground-truth.md)
--------------------------------------------
``training.scheme: frozen`` (:mod:`headloc.groundtruth.frozen`, the default of
config/ground_truth.yaml): phase 1 trains the whole model on the general text with every head on;
phase 2 freezes every parameter but the planted heads' own q/k/v rows and o_proj columns and
trains them on text batches (every head on) and task batches (:mod:`headloc.groundtruth.frozen_rows`)
in which every unplanted head is present on its own document, as at evaluation: only the planted
heads can learn the tasks.

``training.scheme: constructed`` (:mod:`headloc.groundtruth.construct`, the certified family):
the text dims are trained on the general text and the planted heads written by hand.

The first scheme (``patched``: every head outside the planted ones patched with another
document's output in task rows) planted on tiny only; it is described in docs/ground-truth.md and
no longer in the code.

Everything is seeded by the recipe; with the same torch thread count the weights are identical.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from headloc.groundtruth import tasks as T
from headloc.groundtruth.frozen import train_frozen
from headloc.groundtruth.recipe import Recipe
from headloc.groundtruth.training import make_tokenizer


def train(recipe: Recipe, *, threads: int = 1, log=print):
    """The trained model (eval mode) and a training record (losses, seconds)."""
    scheme = recipe.training.get("scheme")
    if scheme == "constructed":
        from headloc.groundtruth.construct import build_constructed

        return build_constructed(recipe, threads=threads, log=log)
    if scheme == "frozen":
        if recipe.design.interactions:  # the frozen scheme trains single and redundant roles only
            raise ValueError(f"{recipe.name}: interactions ({sorted(recipe.design.interactions)}) are written by "
                             "scheme constructed only, not frozen")
        return train_frozen(recipe, threads=threads, log=log)
    raise ValueError(f"unknown training scheme {scheme!r}: constructed or frozen (patched, the first, is retired: "
                     "docs/ground-truth.md)")


def build(recipe: Recipe, out_dir, *, threads: int = 1, log=print) -> Path:
    """Train ``recipe`` and write its folder atomically: checkpoint, tokenizer, tasks/, planted.json.

    The folder is written beside ``out_dir`` under a temporary name and renamed into place once
    complete, so an interrupted build leaves no half-written model.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        model, record = train(recipe, threads=threads, log=log)
        model.save_pretrained(tmp)
        make_tokenizer(recipe).save_pretrained(tmp)
        names = T.write_task_folder(recipe.design, tmp / "tasks")
        planted = {
            "name": recipe.name,
            "digest": recipe.digest(),
            "recipe": recipe.as_dict(),
            "placement": recipe.placement(),
            "sources": T.source_positions(recipe.design),
            "lm_eval_tasks": names,
            "training": record,
        }
        (tmp / "planted.json").write_text(json.dumps(planted, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o755)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out_dir
