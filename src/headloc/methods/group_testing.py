"""Adaptive group testing (:mod:`headloc.search.group_testing`): ablate each group of a random
partition once, then halve the group whose ablation lowered the score most, round by round, and
confirm each head found by ablating it alone; stops at ``validation.top_k`` + ``extra_heads``
confirmed heads or ``search.n_masks`` evaluations (the unablated row included). Options: section
``group_testing`` (``group_size``: ``auto`` or heads per group; ``masks_per_round``: masks scored
together; ``extra_heads``: heads confirmed beyond the top k, for the universal filter)."""

from headloc.methods.contract import SCALE, Method, read_sequential

DEFAULTS = {"group_size": "auto", "masks_per_round": 1, "extra_heads": 2}


def search(n_heads, params):
    from headloc.search.group_testing import GroupTesting

    options = {**DEFAULTS, **params.options}
    size = options["group_size"]
    if size != "auto" and (isinstance(size, bool) or not isinstance(size, int)):
        raise ValueError(f"group_testing.group_size must be 'auto' or a number of heads, got {size!r}")
    return GroupTesting(n_heads=n_heads, budget=params.n_masks, seed=params.seed, k=params.top_k,
                        group_size=None if size == "auto" else size, masks_per_round=options["masks_per_round"],
                        extra=options["extra_heads"])


def search_id(parts) -> str:
    o = {**DEFAULTS, **parts.options}
    return (f"group_testing_m{parts.n_masks}_g{o['group_size']}_per{o['masks_per_round']}_x{o['extra_heads']}_"
            f"{parts.tail}{parts.repeat_suffix}")


METHODS = (
    Method(
        name="group_testing", kind="sequential",
        about="adaptive group testing: halve the most damaging group, confirm heads alone",
        label="score change when ablated (a confirmed head's own; else its smallest measured group's)", marker="*",
        reading="A confirmed head's cell (one of its top heads, outlined) is the change in the task's score (a\n"
                "fraction: -0.10 is 10 points of accuracy) when that head is ablated by itself. Every other cell is\n"
                "the change measured for the smallest group of heads that holds it (less the confirmed heads'\n"
                "own changes in that group), shared by the whole group, or 0 where the budget ran out before\n"
                "its group was scored: ``labels`` in recovery.json says which (confirmed, alone, group of n,\n"
                "not measured).\n\n" + SCALE,
        search_id=search_id, recover=read_sequential, search=search, budgeted=True, repeats=True,
        options="group_testing", defaults=DEFAULTS,
    ),
)
