"""Planted-head models (docs/ground-truth.md): build each one, then measure its truth.

Included by the main Snakefile (its targets do not depend on these rules), or run on its own:

    snakemake -s rules/ground_truth.smk planted_all --cores 1 --configfile config/ground_truth.yaml
    snakemake -s rules/ground_truth.smk results/planted/tiny/truth.json --cores 1

(targets before --configfile: it would take a target after it for a config file).

The recipe comes from the config key ``ground_truth`` when the config has one, else from
config/ground_truth.yaml beside this checkout. Each job's params hold the recipe's digest and the
digest of the builder's code, so a changed seed, size, design or builder re-runs exactly the models
it concerns.
"""

import os

from headloc.groundtruth.recipe import load_config as load_ground_truth_config
from headloc.groundtruth.recipe import recipe_from_config as planted_recipe
from headloc.groundtruth.recipe import code_digest as planted_code_digest

GROUND_TRUTH = config.get("ground_truth") or load_ground_truth_config(
    os.path.join(
        os.path.dirname(workflow.current_basedir), "config", "ground_truth.yaml"
    )
)
PLANTED = {name: planted_recipe(GROUND_TRUTH, name) for name in GROUND_TRUTH["models"]}
PLANTED_CODE = planted_code_digest()

PLANTED_NAMES = (
    "|".join(sorted(PLANTED)) or "(?!)"
)  # (?!): no name matches when there is none


rule planted_all:
    """Every planted model the config's ground_truth.build lists, with its truth."""
    input:
        expand(
            "results/planted/{planted}/truth.json",
            planted=GROUND_TRUTH.get("build", []),
        ),


rule planted_model:
    """Train one planted-head model: checkpoint, tokenizer, lm-eval task folder, planted.json."""
    output:
        model=directory("results/planted/{planted}/model"),
    log:
        "results/logs/ground_truth/{planted}.build.log",
    wildcard_constraints:
        planted=PLANTED_NAMES,
    conda:
        "../envs/headloc.yaml"
    threads: 1
    params:
        # the part of the config this model depends on (its cache key)
        config=lambda wildcards: {
            "design": GROUND_TRUTH["design"],
            "training": GROUND_TRUTH.get("training", {}),
            "models": {wildcards.planted: GROUND_TRUTH["models"][wildcards.planted]},
        },
        digest=lambda wildcards: PLANTED[wildcards.planted].digest(),
        builder=PLANTED_CODE,
    script:
        "../scripts/build_planted_model.py"


rule planted_truth:
    """Every head ablated alone, the planted sets and the redundant pair: the measured truth."""
    input:
        model="results/planted/{planted}/model",
    output:
        truth="results/planted/{planted}/truth.json",
        table="results/planted/{planted}/truth.md",
    log:
        "results/logs/ground_truth/{planted}.truth.log",
    wildcard_constraints:
        planted=PLANTED_NAMES,
    conda:
        "../envs/headloc.yaml"
    threads: 1
    params:
        digest=lambda wildcards: PLANTED[wildcards.planted].digest(),
        builder=PLANTED_CODE,
    script:
        "../scripts/planted_truth.py"
