"""Score one chunk of masks on the identification subset (rule score_masks)."""

import json

import numpy as np
import pandas as pd

from headloc.io import write_table, write_text
from headloc.workflow.jobs import scoring_evaluator, start_evaluating_job

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
masks = np.load(snakemake.input.masks)
rows = np.array_split(np.arange(len(masks)), snakemake.params.chunks)[int(snakemake.wildcards.chunk)]
if len(rows) == 0:  # an empty chunk (cs_adaptive's stage 2 after a settled stage 1): nothing to load
    log.info("chunk %s: no masks to score", snakemake.wildcards.chunk)
    results = []
else:
    p = snakemake.params
    evaluator = scoring_evaluator(p.location, p.model, p.task, snakemake.input.docs, snakemake.config, log)
    log.info("scoring masks %d..%d of %d on %s", rows[0], rows[-1], len(masks), evaluator.task.lm_eval_task)
    results = evaluator.evaluate_masks(masks[rows], desc=f"chunk {snakemake.wildcards.chunk}")

write_text(snakemake.output.samples, "".join(
    json.dumps({"mask": int(row), "score": result.score, "samples": result.samples}) + "\n"
    for row, result in zip(rows, results)
))
# the task's declared direction travels with the raw scores; headloc.io.read_scores orients them
write_table(snakemake.output.scores, pd.DataFrame({"mask": rows, "score": [r.score for r in results],
                                                   "higher_is_better": snakemake.params.higher_is_better}))
if results:
    log.info("mean score %.4f", np.mean([r.score for r in results]))
