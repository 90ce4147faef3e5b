"""One-shot greedy: every head ablated alone (N + 1 evaluations: the unablated row, then the
identity); a head's effect is its score change. When greedy runs too, its round 1 is this matrix and
one-shot greedy reads it instead of scoring its own."""

from headloc.methods.contract import SCALE, Method, fit_masks
from headloc.search.masks import single_head_masks


def single_heads(n_heads, n_masks, sparsity, rng):
    return single_head_masks(n_heads)


def recover(inputs, names, params, log) -> dict:
    from headloc.search.recovery import SingleHeadRecovery

    return fit_masks(inputs, names, params, log, estimator=SingleHeadRecovery(), stability=False)


METHODS = (
    Method(
        name="greedy1s", kind="masks", about="one-shot greedy: every head ablated alone",
        label="score change when ablated alone", marker="D",
        reading="Each cell is the change in the task's score (a fraction: -0.10 is 10 points of accuracy) when that\n"
                "head alone is ablated (one-shot greedy: one evaluation per head).\n\n" + SCALE, search_id=lambda parts: f"greedy1s_{parts.tail}",
        algorithm=single_heads, recover=recover, rows_from=("greedy", "round1"),
    ),
)
