"""Every search method measured against certified planted heads (headloc.groundtruth.benchmark).

    .venv/bin/python benchmarks/ground_truth.py results/planted/c32-s0 results/planted/c32-s1 ...
    .venv/bin/python benchmarks/ground_truth.py results/planted/c1024-s* --methods cs_stratified greedy1s \
        group_testing --budgets 50 100 200 --seeds 5
    .venv/bin/python benchmarks/ground_truth.py --merge out1/recall.csv out2/recall.csv --out merged
"""

import argparse
import logging
from pathlib import Path

import pandas as pd

from headloc.groundtruth import benchmark as gt
from headloc.methods.settings import SearchSettings


def main(argv=None) -> None:
    names = gt.method_names()
    parser = argparse.ArgumentParser(description=gt.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", type=Path, help="planted model folders (results/planted/<name>)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="CSV",
                        help="summarise the recall.csv files of earlier runs instead of running")
    parser.add_argument("--methods", nargs="+", default=names, choices=names)
    parser.add_argument("--budgets", nargs="+", type=int, default=list(gt.DEFAULT_BUDGETS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds per random method and budget")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed (more seeds for an earlier run: --merge both recall.csv files)")
    parser.add_argument("--tasks", nargs="+", help="only these tasks (default: every task in truth.json)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, cuda:1, ...")
    parser.add_argument("--out", type=Path, default=Path("results/ground_truth"))
    args = parser.parse_args(argv)
    if not (args.merge or args.models):
        parser.error("name planted model folders, or --merge recall.csv files")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # fonts missing here: no finding
    defaults = SearchSettings()  # the workflow's defaults, where they live
    sparsity, alpha = defaults.sparsity, defaults.alpha
    if args.merge:
        table = pd.concat([pd.read_csv(path) for path in args.merge], ignore_index=True)
    else:
        import torch

        torch.set_num_threads(args.threads)
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        args.out.mkdir(parents=True, exist_ok=True)
        table = pd.concat([gt.benchmark(m, args.methods, args.budgets, seeds, sparsity=sparsity, alpha=alpha,
                                        tasks=args.tasks, device=args.device, partial=args.out / f"{m.name}.partial.csv")
                           for m in args.models], ignore_index=True)
    print(gt.report(table, args.out, sparsity))


if __name__ == "__main__":
    main()
