"""Two runs of the same config in two dtypes (or on two machines): how far their scores and heads differ.

    .venv/bin/python benchmarks/dtype_compare.py RUN_A RUN_B [--masks 16]

RUN_A and RUN_B are workflow folders (each holding results/) of the same config but for the model's
``dtype`` (docs/performance.md, "bfloat16 against float32", says how they were made). For every
search the two share: the first ``--masks`` masks of its stage-1 design (the same masks in both runs:
a design depends on its seed only) scored in each, the largest and the mean score difference, both
against the spread of the scores over the masks (what a search tells heads apart by), their rank
correlation, and the search's top heads in each run with their overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr


def searches(run: Path) -> dict[str, Path]:
    """``model/task/search`` -> its folder, for every search with a recovery."""
    results = run / "results"
    return {str(path.parent.relative_to(results)): path.parent for path in results.glob("*/*/*/recovery.json")}


def stage1_scores(folder: Path) -> np.ndarray:
    tables = sorted((folder / "scores").glob("*.tsv"))
    return pd.concat(pd.read_csv(t, sep="\t") for t in tables).sort_values("mask")["score"].to_numpy()


def compare(a: Path, b: Path, masks: int) -> dict:
    score_a, score_b = stage1_scores(a)[:masks], stage1_scores(b)[:masks]
    difference = np.abs(score_a - score_b)
    spread = float(np.std(score_a))
    top_a, top_b = (json.loads((f / "recovery.json").read_text())["top_heads"] for f in (a, b))
    return {"masks": len(score_a), "max_diff": float(difference.max()), "mean_diff": float(difference.mean()),
            "spread": spread, "max_diff_per_spread": float(difference.max() / spread),
            "spearman": float(spearmanr(score_a, score_b).statistic), "top_a": top_a, "top_b": top_b,
            "top_overlap": len(set(top_a) & set(top_b)), "top1_same": top_a[:1] == top_b[:1]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--masks", type=int, default=16, help="stage-1 masks compared per search (default 16)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    found_a, found_b = searches(args.run_a), searches(args.run_b)
    shared = sorted(set(found_a) & set(found_b))
    if not shared:
        parser.error(f"{args.run_a} and {args.run_b} share no search with a recovery.json")
    rows = {name: compare(found_a[name], found_b[name], args.masks) for name in shared}
    print(f"{'search':<70} {'max|d|':>8} {'mean|d|':>8} {'spread':>7} {'max/spr':>7} {'rho':>6}  top-5 overlap")
    for name, r in rows.items():
        print(f"{name:<70} {r['max_diff']:8.4f} {r['mean_diff']:8.4f} {r['spread']:7.3f} "
              f"{r['max_diff_per_spread']:7.3f} {r['spearman']:6.3f}  {r['top_overlap']}/5")
        print(f"{'':<70} A: {', '.join(r['top_a'])}\n{'':<70} B: {', '.join(r['top_b'])}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
