"""The budget at which each search method reaches 95 % of greedy's Delta Task, over several seeds.

    .venv/bin/python benchmarks/search_efficiency.py                       # methods + continuous, 5 seeds
    .venv/bin/python benchmarks/search_efficiency.py --configs config/methods.yaml --seeds 3
    .venv/bin/python benchmarks/search_efficiency.py --no-run              # summarise finished runs
    .venv/bin/python benchmarks/search_efficiency.py --help

Each config (default: config/methods.yaml, every method on the task's own 0/1 score, and
config/continuous.yaml, compressed sensing on continuous scores) runs as its own workflow in
``<workdir>/<config name>/`` with ``search.repeats`` set to ``--seeds``: repeat r draws its masks
with seed + r, so every random method gets ``--seeds`` independent designs, and smaller budgets
are the first rows of the largest design (``search.budgets``). One directory per config because
each config has its own main search and thus its own universal heads (``universal_heads.json``
is per model): two configs in one directory would keep invalidating each other's greedy. Then it
merges the runs' Table 4s and prints, per task, every method's Delta Task of the top k against
its budget (mean +- sd over seeds, share of greedy's), and the smallest budget whose mean reaches
``--share`` of greedy's with its ratio to greedy's evaluations (headloc.report.efficiency).
Greedy, scored on the task itself, is the reference: a config with greedy must be among them.
Writes ``<workdir>/search_efficiency.{json,md}``. Offline; the workflow's runs are cached, so a
second call only summarises.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from headloc.workflow.config import validate_config
from headloc.workflow.plan import Plan
from headloc.report.efficiency import efficiency_points, smallest_budgets, with_search_fields
from headloc.workflow.selection import model_universal_heads

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = [REPO / "config" / "methods.yaml", REPO / "config" / "continuous.yaml"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", type=Path, default=DEFAULT_CONFIGS,
                        help="workflow configs, each run in its own directory (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=5, help="search.repeats of every config (default 5)")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="keep only these of each config's search.methods (its validation.method is kept)")
    parser.add_argument("--n-masks", type=int, default=None, help="override search.n_masks of every config")
    parser.add_argument("--budgets", type=int, nargs="*", default=None, help="override search.budgets of every config")
    parser.add_argument("--share", type=float, default=0.95, help="share of greedy's Delta Task to reach")
    parser.add_argument("--target-ratio", type=float, default=0.02,
                        help="the goal: reach --share with at most this fraction of greedy's evaluations")
    parser.add_argument("--workdir", type=Path, default=REPO / "results" / "benchmarks" / "search_efficiency")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--no-run", action="store_true", help="only summarise the Table 4s already there")
    return parser.parse_args(argv)


def variant_config(path: Path, seeds: int, methods: list[str] | None, n_masks: int | None = None,
                   budgets: list[int] | None = None) -> dict:
    """The config as run: ``search.repeats`` = seeds, methods restricted (the main method stays),
    ``n_masks`` and ``budgets`` replaced when given."""
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    search = config.setdefault("search", {})
    search["repeats"] = seeds
    if n_masks is not None:
        search["n_masks"] = n_masks
    if budgets is not None:
        search["budgets"] = budgets
    if methods:
        main = config.get("validation", {}).get("method", "cs_stratified")
        search["methods"] = [m for m in search.get("methods", [main]) if m in methods or m == main]
    return config


def run_config(path: Path, args) -> Path:
    """Run one config's Table 4 in its own directory; return that Table 4's CSV."""
    where = args.workdir / path.stem
    table = where / "results" / "tables" / "table4.csv"
    if args.no_run:  # the config file left there is the one that run used
        return table
    where.mkdir(parents=True, exist_ok=True)
    config_file = where / "benchmark-config.yaml"
    config_file.write_text(yaml.safe_dump(variant_config(path, args.seeds, args.methods, args.n_masks, args.budgets),
                                          sort_keys=False))
    command = [str(Path(sys.executable).with_name("snakemake")), "table4", "--snakefile", str(REPO / "Snakefile"),
               "--directory", str(where), "--cores", str(args.cores), "--rerun-incomplete",
               "--configfile", str(config_file.resolve())]
    print(f"== {path.name} in {where}:\n   {' '.join(command)}", flush=True)
    started = time.time()
    subprocess.run(command, check=True, cwd=REPO)
    print(f"   done in {time.time() - started:.0f} s", flush=True)
    return table


def run_plan(config_file: Path) -> Plan:
    """The plan of the config a run used: it says each search's budget, repeat and score."""
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    validate_config(config, REPO / "config" / "schema.yaml")
    return Plan(config)


def read_universal(where: Path, plan: Plan) -> dict[str, list[str]]:
    """Per model, the universal heads that run's Table 4 filtered out, found as the workflow finds
    them (given by universal.heads, or detected on the main search's rankings:
    results/<model>/universal_heads.json exists only where greedy needed it); empty when
    universal.filter is off."""
    rule = plan.config["universal"]
    if not rule["filter"]:
        return {}
    found = {}
    for model in plan.models:
        rankings = {task: json.loads((where / "results" / model / task / plan.main_search(task) / "recovery.json")
                                     .read_text())["ranking"] for task in plan.localized}
        found[model] = list(model_universal_heads(rankings, plan.capabilities, rule, model))
    return found


def percent(value: float) -> str:
    return "-" if pd.isna(value) else f"{100 * value + 0.0:.0f}%"  # + 0.0: no "-0%"


def curve_table(points: pd.DataFrame, share: float) -> str:
    lines = ["| model | task | method | y | budget | evals | seeds | Delta Task mean +- sd | min..max | of greedy | seeds >= share |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in points.itertuples(index=False):
        sd = "" if pd.isna(r.sd) else f" +- {r.sd:.1f}"
        lines.append(f"| {r.model} | {r.task} | {r.method} | {r.y} | {r.budget} | {r.n_evals:.0f} | {r.seeds} | "
                     f"{r.mean:.1f}{sd} | {r.min:.0f}..{r.max:.0f} | {percent(r.share_of_greedy)} | "
                     f"{r.seeds_reaching}/{r.seeds} |")
    return "\n".join(lines)


def summary_table(best: pd.DataFrame, share: float, target: float) -> str:
    lines = [f"| model | task | method | y | smallest budget at {percent(share)} of greedy | evals | Delta Task mean +- sd "
             f"(greedy) | seeds reaching | / greedy's evals | <= {percent(target)}? |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in best.itertuples(index=False):
        reached = not pd.isna(r.budget)
        sd = "" if pd.isna(r.sd) else f" +- {r.sd:.1f}"
        budget = f"{r.budget:.0f}" if reached else f"none (best {percent(r.share_of_greedy)})"
        ratio = f"{r.ratio_to_greedy:.3f}" if reached else "-"
        meets = "yes" if reached and r.ratio_to_greedy <= target else "no"
        lines.append(f"| {r.model} | {r.task} | {r.method} | {r.y} | {budget} | {r.n_evals:.0f} | {r.mean:.1f}{sd} "
                     f"({r.greedy:.1f}) | {r.seeds_reaching}/{r.seeds} | {ratio} | {meets} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    tables, universal = [], {}
    for path in args.configs:
        table = run_config(path, args)
        if not table.is_file():
            sys.exit(f"no Table 4 at {table}: run without --no-run first")
        where = table.parents[2]
        plan = run_plan(where / "benchmark-config.yaml")
        tables.append(with_search_fields(pd.read_csv(table), plan).assign(config=path.stem))
        universal[path.stem] = read_universal(where, plan)
    merged = pd.concat(tables, ignore_index=True).drop_duplicates(subset=["model", "task", "search"])
    points = efficiency_points(merged, args.share)
    best = smallest_budgets(points, args.share)
    report = "\n\n".join([
        f"Universal heads filtered (per config and model): {universal}",
        "Delta Task of the top k (points) against the budget, over seeds:", curve_table(points, args.share),
        f"Smallest budget whose mean Delta Task reaches {percent(args.share)} of greedy's:",
        summary_table(best, args.share, args.target_ratio)])
    print(report)
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "search_efficiency.md").write_text(report + "\n")
    (args.workdir / "search_efficiency.json").write_text(json.dumps(
        {"share": args.share, "seeds": args.seeds, "universal": universal,
         "points": json.loads(points.to_json(orient="records")),
         "smallest_budgets": json.loads(best.to_json(orient="records"))}, indent=1))
    print(f"\nwritten: {args.workdir / 'search_efficiency.md'}, {args.workdir / 'search_efficiency.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
