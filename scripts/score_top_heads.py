"""Score a search's top-k heads on the identification subset (rule score_top_heads, appendix A.1)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import numpy as np

from headloc.heads import HeadGeometry, headset_mask
from headloc.io import read_json, write_json
from headloc.workflow.jobs import scoring_evaluator, start_evaluating_job
from headloc.data.units import display_score

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
recovery = read_json(snakemake.input.recovery)
p = snakemake.params
evaluator = scoring_evaluator(p.location, p.model, p.task, snakemake.input.docs, snakemake.config, log)
geometry = HeadGeometry.of(evaluator.lm.model.config)
mask = headset_mask(recovery["top_heads"], geometry.n_layers, geometry.n_heads)
baseline, ablated = (r.score for r in evaluator.evaluate_masks([np.zeros_like(mask), mask], progress=False))
unit = snakemake.params.unit
shown = {name: display_score(value, baseline, unit) for name, value in
         (("baseline", baseline), ("ablated", ablated))}
log.info("%s: %.4f unablated, %.4f with %s ablated", snakemake.wildcards.search, baseline, ablated,
         ", ".join(recovery["top_heads"]))
write_json(snakemake.output[0], {
    "model": snakemake.wildcards.model, "task": snakemake.wildcards.task,
    "search": snakemake.wildcards.search, **snakemake.params.spec,
    "top_heads": recovery["top_heads"], **shown,
    "degradation": shown["ablated"] - shown["baseline"],
    "higher_is_better": snakemake.params.higher_is_better,
})
