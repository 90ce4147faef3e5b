"""Two runs of the same config in two dtypes (or on two machines): how far their scores and heads differ.

    .venv/bin/python benchmarks/dtype_compare.py RUN_A RUN_B [--masks 16] [--json out.json]

RUN_A and RUN_B are workflow folders (each holding results/) of the same config but for the model's
``dtype`` (docs/performance.md, "bfloat16 against float32", says how they were made). For every
search the two share (headloc.workflow.benchmark_runs.compare_runs): the first ``--masks`` masks of
its stage-1 design (the same masks in both runs: a design depends on its seed only) scored in each,
the largest and the mean score difference, both against the spread of the scores over the masks
(what a search tells heads apart by), their rank correlation, and the search's top heads in each run
with their overlap.
"""

import argparse
import json
import sys
from pathlib import Path

from headloc.workflow.benchmark_runs import compare_runs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--masks", type=int, default=16, help="stage-1 masks compared per search (default 16)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    try:
        rows = compare_runs(args.run_a, args.run_b, args.masks)
    except ValueError as error:
        parser.error(str(error))
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
