"""Adaptive group testing (:mod:`headloc.search.group_testing`): ablate each group of a random
partition once, then halve the group whose ablation lowered the score most, round by round, and
confirm each head found by ablating it alone; stops at ``validation.top_k`` + ``extra_heads``
confirmed heads or ``search.n_masks`` evaluations (the unablated row included; at least the baseline
and one partition, :func:`least_budget`). Options: section
``group_testing`` (``group_size``: ``auto`` or heads per group; ``masks_per_round``: masks scored
together; ``extra_heads``: heads confirmed beyond the top k, for the universal filter)."""

from dataclasses import dataclass

from headloc.methods.contract import SCALE, Method, budget_id
from headloc.methods.rules import integer, integer_or
from headloc.methods.settings import MethodOptions, setting


@dataclass(frozen=True)
class GroupTestingOptions(MethodOptions, section="group_testing"):
    """Adaptive group testing (search method group_testing, headloc.search.group_testing): it
    spends search.n_masks evaluations at most (the unablated row included) and stops at
    validation.top_k + extra_heads confirmed heads."""

    group_size: int | str = setting("auto", integer_or(1, "auto"), doc="""Heads per group of the first
                                    partition, or auto: the power of two nearest to N ln 2 / (2 k) (64 for
                                    1,024 heads and k = 5).""")
    masks_per_round: int = setting(1, integer(1), doc="""Masks scored together per round (they share forward
                                   passes); 1 is fully sequential.""")
    extra_heads: int = setting(2, integer(0), doc="""Heads confirmed beyond validation.top_k before the search
                               stops, so that a top k with universal heads filtered out (universal.filter)
                               still holds confirmed heads; each costs about log2(group size) + 1 evaluations.""")

    @property
    def size(self) -> int | None:
        """``group_size`` as group testing takes it: a number of heads, or None for ``auto``."""
        return None if self.group_size == "auto" else self.group_size


def build(n_heads, params):
    from headloc.search.group_testing import GroupTesting

    options = params.options
    return GroupTesting(n_heads=n_heads, n_masks=params.n_masks, seed=params.seed, k=params.top_k,
                        group_size=options.size, masks_per_round=options.masks_per_round,
                        extra_heads=options.extra_heads)


def least_budget(n_heads, top_k, options) -> tuple[int, str, str]:
    """The baseline and one whole partition (:func:`headloc.search.group_testing.partition_budget`)."""
    from headloc.search.group_testing import default_group_size, partition_budget

    size = min(n_heads, options.size or default_group_size(n_heads, top_k))
    least = partition_budget(n_heads, size)
    return least, f"groups of {size}", f"to score the unablated model and one partition of {least - 1} groups"


def search_id(parts) -> str:
    o = parts.options
    return budget_id("group_testing", parts, f"k{parts.top_k}", f"g{o.group_size}", f"per{o.masks_per_round}",
                     f"x{o.extra_heads}", sparsity=False)


# how to read its heatmap (the caption in Snakemake's report)
READING = """A confirmed head's cell (one of its top heads, outlined) is the change in the task's score (a
fraction: -0.10 is 10 points of accuracy) when that head is ablated by itself. Every other cell is
the change measured for the smallest group of heads that holds it (less the confirmed heads'
own changes in that group), shared by the whole group: ``labels`` in recovery.json says which
(confirmed, alone, group of n). A search stopped at its cap before confirming its top k says
so in the title (``warnings`` in recovery.json).

""" + SCALE


METHODS = (
    Method(name="group_testing", kind="sequential", algorithm=build, options=GroupTestingOptions,
           least_budget=least_budget, search_id=search_id, budgeted=True, repeats=True, marker="*",
           about="adaptive group testing: halve the most damaging group, confirm heads alone",
           label="score change when ablated (a confirmed head's own; else its smallest measured group's)",
           reading=READING),
)
