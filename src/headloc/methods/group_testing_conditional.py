"""Conditional group testing (:mod:`headloc.search.conditional`): group testing that confirms its
first head alone, then keeps searching with the heads found so far ablated (greedy's question:
which head hurts most on top of those), and finds pairs of heads that matter only together. Stops
at ``validation.top_k`` + ``extra_heads`` confirmed heads or ``search.n_masks`` evaluations (the
unablated row included). Options: section ``conditional_group_testing`` (``group_size``,
``extra_heads`` as group testing's; ``background``: heads confirmed alone before the search goes on
beside them; ``pair_screen``: screen every union of two groups for a redundant pair with the
budget left).

A method of its own rather than an option of ``group_testing``: its record, values, labels and
ranking are not group testing's, both can run side by side on one subset, and group testing's
search ids (and the results filed under them) stay as they are. (The module's name puts it beside
group testing in the registry's order.)"""

from dataclasses import dataclass

from headloc.methods import group_testing
from headloc.methods.contract import SCALE, Method, budget_id
from headloc.methods.rules import flag, integer, integer_or
from headloc.methods.settings import MethodOptions, setting


@dataclass(frozen=True)
class ConditionalGroupTestingOptions(MethodOptions, section="conditional_group_testing"):
    """Conditional group testing (search method conditional_group_testing,
    headloc.search.conditional): group testing that confirms its first head alone, then searches
    with the heads found so far ablated, and finds pairs that act only together; it spends
    search.n_masks evaluations at most (the unablated row included) and stops at validation.top_k +
    extra_heads confirmed heads."""

    group_size: int | str = setting("auto", integer_or(1, "auto"), doc="""Heads per group of both partitions
                                    (alone and beside the background), or auto: the power of two nearest to
                                    N ln 2 / (2 k) (64 for 1,024 heads and k = 5).""")
    extra_heads: int = setting(2, integer(0), doc="""Heads confirmed beyond validation.top_k before the search
                               stops, as group testing's.""")
    background: int = setting(1, integer(0), doc="""Heads confirmed alone (at most validation.top_k - 1: more
                              is refused, not capped) before the search goes on with them ablated, each head
                              it finds joining them; 0 is group testing.""")
    pair_screen: bool = setting(False, flag(), doc="""With the budget left once the heads are confirmed, ablate
                                every union of two groups to find redundant pairs across groups (about
                                m (m - 1) / 2 masks for m groups).""")

    size = group_testing.GroupTestingOptions.size

    def problems(self, top_k: int) -> list[tuple[str, str]]:
        """A background of more than ``top_k - 1`` heads: the search would cap it (the last of the
        top k is found beside the others), while its search id names the value given."""
        if self.background <= top_k - 1:
            return []
        return [("background", f"{self.background} is more than the search can confirm alone before going on beside "
                               f"them: top_k {top_k} less the head found beside them, {top_k - 1}; expected "
                               f"0..{top_k - 1} (or a larger top_k)")]


def build(n_heads, params):
    from headloc.search.conditional import ConditionalGroupTesting

    options = params.options
    return ConditionalGroupTesting(n_heads=n_heads, n_masks=params.n_masks, seed=params.seed, k=params.top_k,
                                   group_size=options.size, extra_heads=options.extra_heads, background=options.background,
                                   pair_screen=options.pair_screen)


def least_budget(n_heads, top_k, options) -> tuple[int, str, str]:
    """As group testing's: the baseline and one whole partition (its first stage is group testing)."""
    return group_testing.least_budget(n_heads, top_k, options)


def search_id(parts) -> str:
    o = parts.options
    return budget_id("conditional_group_testing", parts, f"k{parts.top_k}", f"g{o.group_size}", f"x{o.extra_heads}",
                     f"b{o.background}" + ("_screen" if o.pair_screen else ""), sparsity=False)


# how to read its heatmap (the caption in Snakemake's report)
READING = """A confirmed head's cell is the change in the task's score when that head is ablated: alone for
the head confirmed first, beside the heads confirmed before it (the background) for the
others (greedy's gain), together for the two heads of a pair. Every other cell is the change
measured for the smallest group of heads that holds it (less the confirmed heads' own changes
in it), or 0 where its group was never scored: ``labels`` in recovery.json says which, and
whether a head found beside the background also hurts alone; ``details`` names the background
and the pairs.

""" + SCALE


METHODS = (
    Method(name="conditional_group_testing", kind="sequential", algorithm=build,
           options=ConditionalGroupTestingOptions, least_budget=least_budget, search_id=search_id, budgeted=True,
           repeats=True, marker="p",
           about="group testing, then halving beside the first heads confirmed (greedy's question); pairs",
           label="score change when ablated (alone, beside the heads found before, or a pair's; else its smallest "
                 "group's)", reading=READING),
)
