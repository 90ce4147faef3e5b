"""Build one planted-head model folder (rule planted_model; docs/ground-truth.md)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import json
import time

from headloc.groundtruth.build import build
from headloc.groundtruth.recipe import Recipe
from headloc.io import log_to_file

log = log_to_file(snakemake.log[0])
recipe = Recipe.from_dict(snakemake.params.recipe)
log.info("building planted model %s (recipe %s): %s", recipe.name, recipe.digest(), json.dumps(recipe.as_dict()))
start = time.perf_counter()
build(recipe, snakemake.output.model, threads=snakemake.threads, log=log.info)
log.info("built %s in %.1f s", snakemake.output.model, time.perf_counter() - start)
