"""Adaptive group testing (:mod:`headloc.search.group_testing`): ablate each group of a random
partition once, then halve the group whose ablation lowered the score most, round by round, and
confirm each head found by ablating it alone; stops at ``validation.top_k`` + ``extra_heads``
confirmed heads or ``search.n_masks`` evaluations (the unablated row included; at least the baseline
and one partition, :func:`least_budget`). Options: section
``group_testing`` (``group_size``: ``auto`` or heads per group; ``masks_per_round``: masks scored
together; ``extra_heads``: heads confirmed beyond the top k, for the universal filter)."""

from headloc.methods.contract import SCALE, Method, read_sequential

DEFAULTS = {"group_size": "auto", "masks_per_round": 1, "extra_heads": 2}


def group_size(options) -> int | None:
    """The option ``group_size``: a number of heads, or None for ``auto``."""
    size = {**DEFAULTS, **options}["group_size"]
    if size != "auto" and (isinstance(size, bool) or not isinstance(size, int)):
        raise ValueError(f"group_testing.group_size must be 'auto' or a number of heads, got {size!r}")
    return None if size == "auto" else size


def search(n_heads, params):
    from headloc.search.group_testing import GroupTesting

    options = {**DEFAULTS, **params.options}
    return GroupTesting(n_heads=n_heads, budget=params.n_masks, seed=params.seed, k=params.top_k,
                        group_size=group_size(options), masks_per_round=options["masks_per_round"],
                        extra=options["extra_heads"])


def least_budget(n_heads, top_k, options) -> tuple[int, str, str]:
    """The baseline and one whole partition (:func:`headloc.search.group_testing.partition_budget`)."""
    from headloc.search.group_testing import default_group_size, partition_budget

    size = min(n_heads, group_size(options) or default_group_size(n_heads, top_k))
    least = partition_budget(n_heads, size)
    return least, f"groups of {size}", f"to score the unablated model and one partition of {least - 1} groups"


def search_id(parts) -> str:
    o = {**DEFAULTS, **parts.options}
    return (f"group_testing_m{parts.n_masks}_k{parts.top_k}_g{o['group_size']}_per{o['masks_per_round']}_"
            f"x{o['extra_heads']}_{parts.tail}{parts.repeat_suffix}")


METHODS = (
    Method(
        name="group_testing", kind="sequential",
        about="adaptive group testing: halve the most damaging group, confirm heads alone",
        label="score change when ablated (a confirmed head's own; else its smallest measured group's)", marker="*",
        reading="A confirmed head's cell (one of its top heads, outlined) is the change in the task's score (a\n"
                "fraction: -0.10 is 10 points of accuracy) when that head is ablated by itself. Every other cell is\n"
                "the change measured for the smallest group of heads that holds it (less the confirmed heads'\n"
                "own changes in that group), shared by the whole group: ``labels`` in recovery.json says which\n"
                "(confirmed, alone, group of n). A search stopped at its cap before confirming its top k says\n"
                "so in the title (``warnings`` in recovery.json).\n\n" + SCALE,
        search_id=search_id, recover=read_sequential, search=search, least_budget=least_budget, budgeted=True,
        repeats=True,
        options="group_testing", defaults=DEFAULTS,
    ),
)
