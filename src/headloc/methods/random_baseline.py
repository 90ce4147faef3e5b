"""The random baseline: every head ranked in an order drawn from the seed, so its top k is k heads
drawn at random; no evaluation at all. The floor every comparison in the field reports (MIB's
included): a search is worth its evaluations by how far its top k beats this one's. Each repeat
(``search.repeats``) draws again with seed + repeat; the spread over repeats is the floor's width.
"""

import numpy as np

from headloc.methods.contract import Method


def draw(inputs, names, params, log) -> dict:
    """A seeded random order of every head; no effect is measured, so every ``coef`` is None."""
    order = np.random.default_rng(params.seed).permutation(len(names))
    log.info("random order of %d heads from seed %d", len(names), params.seed)
    return {"n_evals": 0, "alpha": None, "r2": None, "intercept": None,
            "ranking": [names[i] for i in order], "coef": {name: None for name in names}}


METHODS = (
    Method(
        name="random", kind="draw", about="random baseline: k heads drawn at random, no evaluation",
        label="none (heads drawn at random, nothing measured)", marker="x",
        reading="The random baseline: the heads were ranked in an order drawn from the seed and nothing was\n"
                "measured, so every cell is gray. The outlined heads, its top k, are the floor a search must beat.",
        search_id=lambda parts: f"random_s{parts.seed}{parts.repeat_suffix}",
        recover=draw, repeats=True,
    ),
)
