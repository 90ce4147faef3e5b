"""Workflow runs the benchmarks start and read back, each in its own directory (its ``results/``).

The search-efficiency benchmark (benchmarks/search_efficiency.py) runs each config as its own
workflow with ``search.repeats`` seeds (:func:`variant_config`), and reads back its Table 4 with
what its plan says of each search (:func:`run_table4`, summarised by :mod:`headloc.report.efficiency`).
One directory per config, because each config has its own main search and thus its own universal
heads (``results/<model>/universal_heads.json``): two configs in one directory would keep
invalidating each other's greedy. The config a run used is left beside it (:data:`CONFIG_FILE`),
so that its Table 4 is read with the plan that made it.

The dtype comparison (benchmarks/dtype_compare.py) reads two runs of one config and compares
each search they share on its first stage-1 masks (:func:`compare_runs`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from headloc.io import read_scores
from headloc.report.comparison import score_agreement
from headloc.report.efficiency import with_search_fields
from headloc.workflow import paths
from headloc.workflow.schema import validate_config
from headloc.workflow.plan import Plan

CONFIG_FILE = "benchmark-config.yaml"
TABLE4 = paths.TABLE.format(table="table4", ext="csv")


def variant_config(config: dict, seeds: int, methods=None, n_masks: int | None = None, budgets=None) -> dict:
    """``config`` as the benchmark runs it: ``search.repeats`` = seeds, methods restricted to
    ``methods`` (the main method, ``validation.method``, stays), ``n_masks`` and ``budgets``
    replaced when given. The config given is left unchanged."""
    config = yaml.safe_load(yaml.safe_dump(config))  # a deep copy
    search = config.setdefault("search", {})
    search["repeats"] = seeds
    if n_masks is not None:
        search["n_masks"] = n_masks
    if budgets is not None:
        search["budgets"] = list(budgets)
    if methods:
        main = config.get("validation", {}).get("method", "cs_stratified")
        search["methods"] = [m for m in search.get("methods", [main]) if m in methods or m == main]
    return config


def write_config(where: Path, config: dict) -> Path:
    """The config of the run in ``where``, written where :func:`run_table4` reads it."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / CONFIG_FILE
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_plan(config_file: Path, schema: Path) -> Plan:
    """The plan of the config a run used: it says each search's budget, repeat and score."""
    config = yaml.safe_load(Path(config_file).read_text(encoding="utf-8"))
    validate_config(config, schema)
    return Plan(config)


def read_universal(where: Path, plan: Plan) -> dict[str, list[str]]:
    """Per model, the universal heads the run in ``where`` filtered out of its Table 4: its rule
    universal_heads' files (given by universal.heads, or detected); empty when universal.filter is off."""
    if not plan.config["universal"]["filter"]:
        return {}
    return {model: json.loads((where / paths.UNIVERSAL.format(model=model)).read_text())["heads"]
            for model in plan.models}


def run_table4(where: Path, schema: Path) -> tuple[pd.DataFrame, dict]:
    """The Table 4 of the run in ``where``, with each search's budget, repeat and score as its
    plan says (:func:`headloc.report.efficiency.with_search_fields`), and the universal heads it
    filtered. FileNotFoundError naming the file when the run has no Table 4 or no config."""
    table, config_file = where / TABLE4, where / CONFIG_FILE
    for path in (config_file, table):
        if not path.is_file():
            raise FileNotFoundError(f"no {path.name} at {path}: run the config first (without --no-run)")
    plan = run_plan(config_file, schema)
    return with_search_fields(pd.read_csv(table), plan), read_universal(where, plan)


def run_searches(run: Path) -> dict[str, Path]:
    """``model/task/search`` -> its folder, for every search of the run in ``run`` with a recovery."""
    found = sorted(Path(run).glob(paths.search_file(paths.RECOVERY, "*", "*", "*")))
    return {str(path.parent.relative_to(Path(run) / paths.RESULTS)): path.parent for path in found}


def stage1_scores(search: Path) -> np.ndarray:
    """A search's stage-1 scores (every chunk of its first design) in mask order, higher-is-better."""
    chunks = sorted(Path(search).glob("scores/*.tsv"))
    if not chunks:
        raise FileNotFoundError(f"no score tables under {Path(search) / 'scores'}")
    return read_scores(chunks)["score"].to_numpy()


def compare_runs(run_a: Path, run_b: Path, masks: int) -> dict[str, dict]:
    """For every search both runs hold: :func:`headloc.report.comparison.score_agreement` of its
    first ``masks`` stage-1 scores in each (the same masks: a design depends on its seed only) and
    of its top heads. ValueError when the runs share no search."""
    found_a, found_b = run_searches(run_a), run_searches(run_b)
    shared = sorted(set(found_a) & set(found_b))
    if not shared:
        raise ValueError(f"{run_a} and {run_b} share no search with a recovery.json")
    rows = {}
    for name in shared:
        tops = [json.loads((found[name] / "recovery.json").read_text())["top_heads"] for found in (found_a, found_b)]
        rows[name] = score_agreement(stage1_scores(found_a[name])[:masks], stage1_scores(found_b[name])[:masks], *tops)
    return rows
