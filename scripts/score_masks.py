"""Score one chunk of masks on the identification subset (rule score_masks)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import numpy as np

from headloc.engine.evaluation import scored
from headloc.io import write_scores
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

# the task's declared direction travels with the raw scores (headloc.io.read_scores orients them), and
# each mask's per-document scores with lm-eval's samples (each head's evidence: headloc.search.evidence)
found = scored(results)
write_scores(snakemake.output.scores, snakemake.output.samples, rows, found, snakemake.params.higher_is_better,
             records=[r.samples for r in results])
if results:
    log.info("mean score %.4f%s", np.mean(found.scores),
             "" if found.per_doc is None else f" over {found.per_doc.shape[1]} documents")
