"""cs_adaptive's stage 2 (rule refine_masks): fit stage 1, stop if its top k is settled, else design
masks over the uncertain candidates (headloc.search.adaptive)."""

import numpy as np

from headloc.search.adaptive import refine, stage_sizes
from headloc.heads import head_name
from headloc.io import log_to_file, read_scores, save_npy, write_json
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
p = snakemake.params
geometry = head_geometry(p.location)
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
masks = np.load(snakemake.input.masks)
scores = read_scores(snakemake.input.scores)
stage1, stage2 = stage_sizes(p.spec["n_masks"])
plan = refine(masks, scores["score"].to_numpy(), k=p.top_k, n_rows=stage2, alpha=p.alpha, random_state=p.seed)
top = [names[i] for i in np.argsort(-plan.probability, kind="stable")[: p.top_k]]
log.info("stage 1: %d masks, P(top %d) of its most likely heads: %s; %s", len(masks), p.top_k,
         ", ".join(f"{h} {plan.probability[names.index(h)]:.2f}" for h in top),
         "settled: no stage 2" if plan.settled else f"stage 2: {len(plan.masks)} masks over {len(plan.candidates)} candidates")
save_npy(snakemake.output.masks, plan.masks)
write_json(snakemake.output.plan, {
    "stage1_masks": int(len(masks)), "stage2_masks": int(len(plan.masks)), "settled": plan.settled,
    "alpha": plan.alpha, "candidates": [names[i] for i in plan.candidates],
    "top_k_probability": {name: float(q) for name, q in zip(names, plan.probability)},
})
