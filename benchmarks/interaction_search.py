"""Heads that act together: group testing, conditional group testing (with and without its pair
screen) and greedy on simulated worlds with a backup head and two pairs (docs/results/simulated-searches.md).

    .venv/bin/python benchmarks/interaction_search.py                      # 10 seeds, 270 and 1,024 heads
    .venv/bin/python benchmarks/interaction_search.py --seeds 20 --budget 300
    .venv/bin/python benchmarks/interaction_search.py --help

Each world (headloc.search.simulate_interactions.make_interaction_world: 40 documents of 4 choices,
a tail of spread tau) holds a universal head, three role heads (document shares 0.2, 0.15, 0.1), a
backup of the first role head (0.175: its documents fall only when both are ablated), a redundant
pair (0.175: only when both are ablated; each alone does nothing) and a synergy pair (0.125: either
one sends them to chance). Each search is told k = the 9 planted heads and a cap of --budget masks;
greedy runs 8 rounds with the universal head left out, as the workflow's universal filter does.
Prints, per world size and search, the share of each kind of head found among the first 8 of its
ranking with the universal head left out (universal: the share of runs that confirmed it), P(all 8
found), the mean evaluations and their share of greedy's, and the two information bounds for 9
heads: coin-weighing (tests that say how much) / binary (tests that say yes or no). Numpy only;
about a minute on one core.
"""

from __future__ import annotations

import argparse
import time

from headloc.search.simulate_interactions import (compare_interactions, interaction_table, make_interaction_world,
                                                  search_bounds)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10, help="worlds (and search seeds) 0..seeds-1 (default 10)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[270, 1024], help="heads per world")
    parser.add_argument("--budget", type=int, default=400, help="each search's cap on masks (default 400)")
    parser.add_argument("--tau", type=float, default=0.01, help="spread of the tail's single-head effects (nats)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    rows = [row for n_heads in args.sizes for row in compare_interactions(range(args.seeds), n_heads, args.budget,
                                                                           tau=args.tau)]
    print(f"seeds 0..{args.seeds - 1}, cap {args.budget} masks, tau {args.tau}: mean recall per kind")
    print(interaction_table(rows))
    for n_heads in args.sizes:
        k = len(make_interaction_world(0, n_heads=n_heads, tau=args.tau).planted)
        quantitative, binary = search_bounds(n_heads, k)
        print(f"{n_heads:,} heads, {k} planted: information bounds {quantitative:.0f} / {binary:.0f} tests")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
