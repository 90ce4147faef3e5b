"""The budget at which each search method reaches 95 % of greedy's Delta Task, over several seeds.

    .venv/bin/python benchmarks/search_efficiency.py                       # methods + continuous, 5 seeds
    .venv/bin/python benchmarks/search_efficiency.py --configs config/methods.yaml --seeds 3
    .venv/bin/python benchmarks/search_efficiency.py --no-run              # summarise finished runs

Each config runs as its own workflow (``snakemake table4``) in ``<workdir>/<config name>/``
(headloc.workflow.benchmark_runs); headloc.report.efficiency sums up their Table 4s.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from headloc.report.efficiency import efficiency_report
from headloc.workflow.benchmark_runs import run_table4, variant_config, write_config

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", type=Path, default=[REPO / "config" / "methods.yaml",
                                                                   REPO / "config" / "continuous.yaml"])
    parser.add_argument("--seeds", type=int, default=5, help="search.repeats of every config (default 5)")
    parser.add_argument("--methods", nargs="+", help="keep only these of each config's search.methods (and its main)")
    parser.add_argument("--n-masks", type=int, help="override search.n_masks of every config")
    parser.add_argument("--budgets", type=int, nargs="*", help="override search.budgets of every config")
    parser.add_argument("--share", type=float, default=0.95, help="share of greedy's Delta Task to reach")
    parser.add_argument("--target-ratio", type=float, default=0.02, help="the goal: this share of greedy's evaluations")
    parser.add_argument("--workdir", type=Path, default=REPO / "results" / "benchmarks" / "search_efficiency")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--no-run", action="store_true", help="only summarise the Table 4s already there")
    args = parser.parse_args(argv)
    tables, universal, snakemake = [], {}, str(Path(sys.executable).with_name("snakemake"))
    for path in args.configs:
        where = args.workdir / path.stem
        if not args.no_run:  # a run's config stays beside it: --no-run reads it back
            config = variant_config(yaml.safe_load(path.read_text()), args.seeds, args.methods, args.n_masks, args.budgets)
            subprocess.run([snakemake, "table4", "--snakefile", str(REPO / "Snakefile"), "--directory", str(where),
                            "--cores", str(args.cores), "--rerun-incomplete",
                            "--configfile", str(write_config(where, config).resolve())], check=True, cwd=REPO)
        table, universal[path.stem] = run_table4(where, REPO / "config" / "schema.yaml")
        tables.append(table.assign(config=path.stem))
    merged = pd.concat(tables, ignore_index=True).drop_duplicates(subset=["model", "task", "search"])
    text, record = efficiency_report(merged, args.share, args.target_ratio, universal)
    print(text)
    (args.workdir / "search_efficiency.md").write_text(text + "\n")
    (args.workdir / "search_efficiency.json").write_text(json.dumps({"seeds": args.seeds, **record}, indent=1))
    print(f"\nwritten: {args.workdir / 'search_efficiency.md'}, {args.workdir / 'search_efficiency.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
