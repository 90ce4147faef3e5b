"""Gradient-guided greedy (:mod:`headloc.search.guided`): greedy's question (which head hurts most
beside the heads chosen so far) asked of a short list that attribution beside them draws up, one
gradient and about ``m + m_abs + carry`` masked evaluations a step instead of one per head; stops
at ``validation.top_k`` heads. Options: section ``guided_greedy`` (``m``: heads of largest
estimated drop listed each step; ``m_abs``: heads of largest estimate of either sign; ``carry``:
runners-up of the step before kept on the list). Kind ``guided``: it scores masks on the
identification subset's scoring task and differentiates the same documents' gold continuations, so
it needs an lm-eval task with gold continuations."""

from dataclasses import dataclass

from headloc.methods.contract import SCALE, Method
from headloc.methods.rules import integer
from headloc.methods.settings import MethodOptions, setting


@dataclass(frozen=True)
class GuidedGreedyOptions(MethodOptions, section="guided_greedy"):
    """Gradient-guided greedy (search method guided_greedy, headloc.search.guided):
    validation.top_k steps, each a gradient of the gold continuations beside the heads chosen so far
    that lists a few heads, each listed head then scored beside them and the most damaging kept;
    about m + m_abs + carry masked evaluations and one gradient pass a step."""

    # defaults measured on SmolLM2 (docs/results/vs-greedy-smollm2.md): 10 + 10 lists greedy's first
    # ioi head where 8 + 4 (+ 3 carried) missed it in 3 seeds of 5
    m: int = setting(10, integer(0), doc="Heads of largest estimated drop on each step's short list.")
    m_abs: int = setting(10, integer(0), doc="""Heads of largest estimate of either sign on each step's short
                         list (a head far from linear in its gate can get a large estimate of the wrong
                         sign); m and m_abs cannot both be 0.""")
    carry: int = setting(0, integer(0), doc="""Runners-up of the step before, by the drop measured there, kept
                         on the short list.""")

    def __post_init__(self):
        super().__post_init__()
        check_short_list(self, " (the short list would hold only the runners-up)")


def check_short_list(options, why: str = "") -> None:
    """A step's short list is not empty: ``options.m`` and ``options.m_abs`` are not both 0 (guided
    greedy's options, and every method whose steps are guided greedy's)."""
    if options.m + options.m_abs == 0:
        raise ValueError(f"{options.key('m')} and {options.key('m_abs')}: both 0 is not valid; expected at least "
                         f"one of them >= 1{why}")


def choose_heads(estimate, score_sets, n_heads, params):
    from headloc.search.guided import guided_greedy

    o = params.options
    return guided_greedy(estimate, score_sets, n_heads, params.top_k, m=o.m, m_abs=o.m_abs, carry=o.carry)


def search_id(parts) -> str:
    o = parts.options
    return f"guided_greedy_k{parts.top_k}_l{o.m}_a{o.m_abs}_c{o.carry}_{parts.tail}"


# how to read its heatmap (the caption in Snakemake's report)
READING = """A chosen head's cell (one of its top heads) is the change in the task's score when that head was
ablated beside the heads chosen before it (greedy's gain). A head listed at some step but not
chosen shows the change measured for it beside that step's heads (its last such step); a head
never listed is 0 and ranked by the last step's gradient. ``labels`` in recovery.json says which;
``details`` gives each step's short list.

""" + SCALE


METHODS = (
    Method(name="guided_greedy", kind="guided", algorithm=choose_heads, options=GuidedGreedyOptions, search_id=search_id,
           marker="8", about="greedy's rounds over short lists that attribution beside the chosen heads draws up",
           label="score change when ablated beside the heads chosen before it (0: never listed)", reading=READING),
)
