"""Planted-head models (docs/ground-truth.md): build each one, then measure its truth.

A workflow of its own, beside the main Snakefile (which does not include it):

    snakemake -s ground_truth.smk --cores 2                                  # every model in `build`
    snakemake -s ground_truth.smk planted_held_out --cores 2                 # the held-out placements
    snakemake -s ground_truth.smk results/planted/c270-s0/truth.json --cores 1

Its config is config/ground_truth.yaml (key ``ground_truth``); another file can replace it with
``--configfile`` (after the targets). Each job's params hold the recipe's digest and the digest of
the code that runs it (its script and every headloc module the script imports, as in the main
Snakefile), so a changed seed, size, design or code re-runs exactly the models it concerns.
"""

import os

from headloc.groundtruth.recipe import model_entries, recipe_from_config
from headloc.workflow.paths import PLANTED_MODEL, PLANTED_SUMMARY, PLANTED_TRUTH


# beside this file, whatever --directory the run works in
configfile: os.path.join(workflow.basedir, "config", "ground_truth.yaml")


GROUND_TRUTH = config["ground_truth"]
PLANTED = {
    name: recipe_from_config(GROUND_TRUTH, name) for name in model_entries(GROUND_TRUTH)
}


wildcard_constraints:
    planted="|".join(sorted(PLANTED)),


rule planted_all:
    """Every planted model the config's ground_truth.build lists, with its truth."""
    default_target: True
    input:
        expand(PLANTED_TRUTH, planted=GROUND_TRUTH.get("build", [])),


rule planted_held_out:
    """The placements held out of every tuning (ground_truth.held_out), with their truth."""
    input:
        expand(PLANTED_TRUTH, planted=GROUND_TRUTH.get("held_out", [])),


rule planted_model:
    """Build one planted-head model: checkpoint, tokenizer, lm-eval task folder, planted.json."""
    output:
        model=directory(PLANTED_MODEL),
    log:
        "results/logs/ground_truth/{planted}.build.log",
    conda:
        "envs/headloc.yaml"
    threads: 1
    params:
        recipe=lambda wildcards: PLANTED[wildcards.planted].as_dict(),  # what it is built from: its cache key
    script:
        "scripts/build_planted_model.py"


rule planted_truth:
    """Every head ablated alone, the planted sets, the redundant pair, the interactions and the certificates: the
    measured truth."""
    input:
        model=PLANTED_MODEL,
    output:
        truth=PLANTED_TRUTH,
        table=PLANTED_SUMMARY,
    log:
        "results/logs/ground_truth/{planted}.truth.log",
    conda:
        "envs/headloc.yaml"
    threads: 2  # the forward passes of every single ablation use both cores (docs/results/ground-truth.md, times)
    params:
        digest=lambda wildcards: PLANTED[wildcards.planted].digest(),
    script:
        "scripts/planted_truth.py"


# Last: every script rule above gets its code's digest as a param, as in the Snakefile.
include: "rules/code.smk"
