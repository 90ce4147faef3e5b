"""Recover per-head effects from one search's scores (checkpoint recover_heads)."""

import numpy as np
import pandas as pd

from headloc.ablation import HeadGeometry
from headloc.heads import head_name
from headloc.io import log_to_file, write_json
from headloc.models import load_config
from headloc.recovery import recovery_for

log = log_to_file(snakemake.log[0])
masks = np.load(snakemake.input.masks)
scores = pd.concat(pd.read_csv(path, sep="\t") for path in snakemake.input.scores).sort_values("mask")
if not np.array_equal(scores["mask"].to_numpy(), np.arange(len(masks))):
    raise ValueError(f"the chunk scores cover masks {scores['mask'].tolist()}, expected 0..{len(masks) - 1}")
geometry = HeadGeometry.of(load_config(snakemake.params.location))
p = snakemake.params
fit = recovery_for(p.method, alpha=p.alpha, random_state=p.seed).fit(masks, scores["score"].to_numpy())
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
top = [names[i] for i in fit.top_k(p.top_k)]
log.info("alpha %.4g, R^2 %.3f, top heads %s", fit.alpha_, fit.r2_, ", ".join(top))
write_json(snakemake.output[0], {
    "model": snakemake.wildcards.model,
    "task": snakemake.wildcards.task,
    "search": snakemake.wildcards.search,
    "method": p.method,
    "n_layers": geometry.n_layers,
    "n_heads": geometry.n_heads,
    "n_evals": fit.n_evals_,
    "alpha": fit.alpha_,
    "r2": fit.r2_,
    "intercept": fit.intercept_,
    "top_heads": top,
    "ranking": [names[i] for i in fit.ranking_],
    "coef": {name: float(c) for name, c in zip(names, fit.coef_)},
})
