"""Layers a mask group agrees on, shared or not (:mod:`headloc.engine.shared_layers`): the same
masks scored both ways by one evaluator of one loaded model, in turns, each turn timed; the scores
must be the same (benchmarks/shared_layers.py).

Two designs of masks: ``greedy``, a greedy round (one head chosen before, L20H0 on SmolLM2, beside
each of every ``step``-th head of the model), and ``heads``, given head sets (``--sets``: a file of
head-set names, such as the ``sets`` of single_heads.json)."""

from __future__ import annotations

import time

import numpy as np

from headloc.engine.shared_layers import shared_order
from headloc.heads import NO_HEADS, headset_mask, parse_headset


def greedy_round(n_layers: int, n_heads: int, chosen_layer: int, step: int) -> np.ndarray:
    """Head ``chosen_layer`` x 0 ablated in every mask, beside one of every ``step``-th head (from head 1).

    >>> greedy_round(3, 2, 1, 2).tolist()
    [[0, 1, 1, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 1, 0, 0, 1]]
    """
    candidates = np.arange(1, n_layers * n_heads, step)
    masks = np.zeros((len(candidates), n_layers * n_heads), dtype=np.int8)
    masks[:, chosen_layer * n_heads] = 1
    masks[np.arange(len(candidates)), candidates] = 1
    return masks


def head_sets(names, n_layers: int, n_heads: int) -> np.ndarray:
    """The masks of head-set names (the unablated model's left out)."""
    return np.array([headset_mask(parse_headset(name), n_layers, n_heads).reshape(-1)
                     for name in names if name != NO_HEADS])


def measure(evaluator, masks: np.ndarray, turns: int = 2) -> dict:
    """Seconds of ``evaluator.evaluate_masks(masks)`` shared and not, ``turns`` times each in turn
    (after the first group evaluate_masks forms, which runs the model's check untimed), and whether
    every score was the same."""
    evaluator.evaluate_masks(masks[shared_order(masks)[: evaluator.masks_per_pass]], progress=False)
    layers = evaluator.lm._shared_layers().layers
    seconds, scores = {"shared": [], "full": []}, {}
    for _ in range(turns):
        for way in ("shared", "full"):
            evaluator.lm.shared.layers = layers if way == "shared" else None
            start = time.perf_counter()
            found = [r.score for r in evaluator.evaluate_masks(masks, progress=False)]
            seconds[way].append(time.perf_counter() - start)
            scores.setdefault(way, found)
    evaluator.lm.shared.layers = layers
    # the ratio of the unrounded seconds: a fast machine rounds a small model's turns to 0.0
    ratio = sum(seconds["shared"]) / sum(seconds["full"])
    return {"masks": len(masks), "shares": layers is not None, "ratio": round(ratio, 2),
            "seconds": {way: [round(s, 1) for s in times] for way, times in seconds.items()},
            "same": scores["shared"] == scores["full"]}
