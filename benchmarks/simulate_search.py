"""Recall of the planted heads against the evaluations spent, on a simulated model (docs/results/simulated-searches.md).

    .venv/bin/python benchmarks/simulate_search.py                    # 12 seeds, M = 50..150
    .venv/bin/python benchmarks/simulate_search.py --seeds 16 --or-pair
    .venv/bin/python benchmarks/simulate_search.py --tau 0.02 --budgets 100 150

The simulated model is headloc.search.simulate's (N heads, default 1,024; 20 documents of 4
choices scored by the gold's mean log-probability; a universal head, role heads with document
shares 0.4 / 0.25 / 0.2 / 0.15, optionally a redundant (OR) pair carrying the last role, a tail of
single-head effects of spread tau nats). Each seed draws a world and the searches' randomness.
Searches: the Lasso with cross-validated penalty on a stratified or Bernoulli design, adaptive
group testing (one mask per round, and rounds of k + 3 masks), Thompson sampling as released and
rewarding damage. Prints, per search and budget M, the mean recall of the planted heads in the
top k +- its standard error over seeds, and the share of seeds with recall 1. Numpy and
scikit-learn only, a minute or two on one core.
"""

import argparse
import time

from headloc.search.simulate import compare, recall_table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=12, help="worlds (and search seeds) 0..seeds-1 (default 12)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 75, 85, 100, 150])
    parser.add_argument("--n-heads", type=int, default=1024)
    parser.add_argument("--tau", type=float, default=0.01, help="spread of the tail's single-head effects (nats)")
    parser.add_argument("--or-pair", action="store_true", help="the last role is carried by a redundant pair")
    parser.add_argument("--sparsity", type=float, default=0.05, help="share of heads per mask (Lasso, Thompson)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    recalls = compare(range(args.seeds), args.budgets, sparsity=args.sparsity, n_heads=args.n_heads,
                      tau=args.tau, or_pair=args.or_pair)
    print(f"N = {args.n_heads}, tau = {args.tau}, OR pair: {args.or_pair}, sparsity {args.sparsity}, "
          f"seeds 0..{args.seeds - 1}: mean recall +- s.e. [P(recall = 1)]")
    print(recall_table(recalls, args.budgets))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
