"""Rank the heads of one finished search (checkpoint recover_heads).

Compressed sensing and one-shot greedy fit eq. (1) to the masks' scores; greedy reads its rounds.
"""

import numpy as np
import pandas as pd

from headloc import greedy
from headloc.heads import HeadGeometry, head_name
from headloc.io import log_to_file, read_json, write_json
from headloc.models import load_config
from headloc.recovery import recovery_for

log = log_to_file(snakemake.log[0])
geometry = HeadGeometry.of(load_config(snakemake.params.location))
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
p = snakemake.params


def fitted():
    """Eq. (1) (Lasso) or the one-shot greedy effects, from the masks and their scores."""
    masks = np.load(snakemake.input.masks)
    scores = pd.concat(pd.read_csv(path, sep="\t") for path in snakemake.input.scores).sort_values("mask")
    if not np.array_equal(scores["mask"].to_numpy(), np.arange(len(masks))):
        raise ValueError(f"the chunk scores cover masks {scores['mask'].tolist()}, expected 0..{len(masks) - 1}")
    fit = recovery_for(p.method, alpha=p.alpha, random_state=p.seed).fit(masks, scores["score"].to_numpy())
    log.info("alpha %.4g, R^2 %.3f", fit.alpha_, fit.r2_)
    return {
        "n_evals": fit.n_evals_, "alpha": fit.alpha_, "r2": fit.r2_, "intercept": fit.intercept_,
        "ranking": [names[i] for i in fit.ranking_],
        "coef": {name: float(c) for name, c in zip(names, fit.coef_)},
    }


def greedy_rounds():
    """The chosen heads in order, then the rest by their score in the last round.

    A chosen head's coefficient is the score change it caused in its round; any other head's, the
    change it would have caused in the last round.
    """
    rounds = [read_json(path) for path in snakemake.input.rounds]
    last = rounds[-1]
    before = [rounds[i - 1]["score"] if i else last["unablated"] for i in range(len(rounds))]
    coef = {name: score - before[-1] for name, score in last["scores"].items()}
    coef.update({r["chosen"][-1]: r["score"] - b for r, b in zip(rounds, before)})
    last_scores = np.array([last["scores"].get(name, np.nan) for name in names])
    chosen = [names.index(name) for name in last["chosen"]]
    return {
        "n_evals": last["n_evals"], "alpha": None, "r2": None, "intercept": last["unablated"],
        "ranking": [names[i] for i in greedy.ranking(chosen, last_scores)],
        "coef": {name: coef[name] for name in names},
    }


result = greedy_rounds() if p.method == "greedy" else fitted()
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
