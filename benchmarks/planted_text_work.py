"""Do a planted model's unplanted heads work on the general text together? (docs/ground-truth.md)

    .venv/bin/python benchmarks/planted_text_work.py results/planted/c1024-s0 results/planted/c1024-s1

truth.json's ``text`` measures each head alone; at 1,024 heads almost none moves the text loss by
0.01 nats, because the text work is spread over many heads. This ablates them in groups: every
unplanted head at once, and ``--draws`` random sets of ``--share`` of all heads (unplanted ones),
and prints the text loss's change (nats) over the same held-out text rows truth.json uses.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.recipe import Design
from headloc.groundtruth.truth import load_planted, text_losses
from headloc.heads import HeadGeometry


def group_masks(names: list[str], planted: set[str], share: float, draws: int, seed: int) -> np.ndarray:
    """Row 0: nothing ablated; row 1: every unplanted head; then ``draws`` random unplanted sets."""
    unplanted = [i for i, name in enumerate(names) if name not in planted]
    masks = np.zeros((2 + draws, len(names)), dtype=np.int8)
    masks[1, unplanted] = 1
    rng = np.random.default_rng(seed)
    for row in range(2, 2 + draws):
        masks[row, rng.choice(unplanted, round(share * len(names)), replace=False)] = 1
    return masks


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path, help="planted model folders (results/planted/<name>)")
    parser.add_argument("--share", type=float, default=0.05, help="share of all heads per random set")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for folder in args.models:
        model, _, planted = load_planted(folder / "model")
        design = Design.from_dict(planted["recipe"]["design"])
        names = HeadGeometry(model.config.num_hidden_layers, model.config.num_attention_heads).names
        heads = {h for hs in planted["placement"].values() for h in hs}
        rows = torch.from_numpy(T.eval_text(design, rows=64 if len(names) <= 256 else 32))
        loss = text_losses(model, rows, group_masks(names, heads, args.share, args.draws, args.seed))
        drawn = loss[2:] - loss[0]
        print(f"{folder.name}: text loss {loss[0]:.4f}; every unplanted head ablated: {loss[1] - loss[0]:+.3f} nats; "
              f"{args.draws} random sets of {args.share:.0%} of the heads: mean {drawn.mean():+.4f} "
              f"(min {drawn.min():+.4f}, max {drawn.max():+.4f})")


if __name__ == "__main__":
    main()
