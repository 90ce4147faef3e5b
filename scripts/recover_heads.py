"""Rank the heads of one finished search (checkpoint recover_heads).

Compressed sensing and one-shot greedy fit eq. (1) to the masks' scores; greedy reads its rounds
(headloc.recovery.greedy_recovery says what its coefficients mean); the gradient methods
(attribution, chg) read what rule gradient_search found (headloc.supervision.recovery_fields).
"""

import numpy as np
import pandas as pd

from headloc.heads import head_name
from headloc.io import log_to_file, read_json, read_scores, write_json
from headloc.models import head_geometry
from headloc.plan import GRADIENT_METHODS

log = log_to_file(snakemake.log[0])
geometry = head_geometry(snakemake.params.location)
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
p = snakemake.params


def scored(masks_path, score_paths):
    """A design and its scores, checked to cover every mask once, in order."""
    masks = np.load(masks_path)
    scores = read_scores(score_paths)
    if not np.array_equal(scores["mask"].to_numpy(), np.arange(len(masks))):
        raise ValueError(f"the chunk scores cover masks {scores['mask'].tolist()}, expected 0..{len(masks) - 1}")
    return masks, scores


def fitted():
    """Eq. (1) (Lasso) or the one-shot greedy effects, from the masks and their scores (cs_adaptive:
    both stages' rows)."""
    from headloc.recovery import recovery_for, top_k_probability  # sklearn (~1 s): not for attribution, chg

    masks, scores = scored(snakemake.input.masks, snakemake.input.scores)
    if "stage2_masks" in snakemake.input.keys():
        masks2, scores2 = scored(snakemake.input.stage2_masks, snakemake.input.stage2_scores)
        log.info("stage 1: %d masks, stage 2: %d masks", len(masks), len(masks2))
        masks, scores = np.vstack([masks, masks2]), pd.concat([scores, scores2])
    if p.rows:  # a nested budget: the first rows of the full design
        log.info("budget %d: the first %d of %d scored masks", p.rows, p.rows, len(masks))
        masks, scores = masks[: p.rows], scores.iloc[: p.rows]
    y = scores["score"].to_numpy()
    fit = recovery_for(p.method, alpha=p.alpha, random_state=p.seed).fit(masks, y)
    log.info("alpha %.4g, R^2 %.3f", fit.alpha_, fit.r2_)
    found = {
        "n_evals": fit.n_evals_, "alpha": fit.alpha_, "r2": fit.r2_, "intercept": fit.intercept_,
        "ranking": [names[i] for i in fit.ranking_],
        "coef": {name: float(c) for name, c in zip(names, fit.coef_)},
    }
    if p.method != "greedy1s":  # the Lasso's uncertainty: how often bootstrap refits keep each head in the top k
        stability = top_k_probability(masks, y, alpha=fit.alpha_, k=p.top_k, random_state=p.seed)
        found["top_k_probability"] = {name: float(q) for name, q in zip(names, stability)}
        log.info("P(top %d): %s", p.top_k, ", ".join(f"{names[i]} {stability[i]:.2f}" for i in fit.ranking_[:p.top_k]))
    return found


def gradient():
    """The gradient method's fields, checked against the model's heads."""
    found = read_json(snakemake.input.gradient)
    method = found.pop("method")
    if method != p.method:
        raise ValueError(f"{snakemake.input.gradient} holds a {method!r} search, expected {p.method!r}")
    if sorted(found["ranking"]) != sorted(names) or sorted(found["coef"]) != sorted(names):
        raise ValueError(f"{snakemake.input.gradient} ranks {len(found['ranking'])} heads, not the model's "
                         f"{geometry.total} ({geometry.n_layers} layers x {geometry.n_heads} heads)")
    return found


if p.method == "greedy":
    from headloc.recovery import greedy_recovery  # sklearn too (the module's estimators); not for attribution, chg

    rounds = [read_json(path) for path in snakemake.input.rounds]
    result = greedy_recovery(rounds, names, exclude=rounds[-1].get("excluded", []))
elif p.method in GRADIENT_METHODS:
    result = gradient()
else:
    result = fitted()
top = result["ranking"][: p.top_k]
log.info("%s: top heads %s after %d evaluations", p.method, ", ".join(top), result["n_evals"])
write_json(snakemake.output[0], {
    "model": snakemake.wildcards.model,
    "task": snakemake.wildcards.task,
    "search": snakemake.wildcards.search,
    "method": p.method,
    "n_layers": geometry.n_layers,
    "n_heads": geometry.n_heads,
    **result,
    "top_heads": top,
})
