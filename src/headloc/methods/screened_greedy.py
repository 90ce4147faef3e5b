"""Screened greedy (:mod:`headloc.search.screened`): group testing screens the heads alone (heads
that take the score to its floor are set aside, the most damaging other head starts the
background), gradient-guided greedy steps beside the background, and a pair probe (gradients
beside two random halves of the heads) for pairs that act only together, right after the first
head (weighed against the steps it would replace) and when a step finds nothing; stops at
``validation.top_k`` heads or when nothing lowers the score, then fills the top k with greedy steps
below the noise (not found). Options: section ``screened_greedy``
(``m``, ``m_abs``: each step's short list, as guided greedy's; ``screen``: heads group testing
confirms alone; ``pair_candidates``: heads the pair probe ablates two by two, 0: no probe;
``probe_leads``: heads each of the probe's halves lists for every later step, 0: none;
``floor_check``: heads measured beside a head at the floor to check it sits there, 0: no check;
``deepen``: batches of ``m`` more heads a step measures where its first ``m`` all raise the score). Kind
``guided``: it scores masks on the identification subset's scoring task and differentiates the same
documents' gold continuations, so it needs an lm-eval task with gold continuations."""

from dataclasses import dataclass

from headloc.methods.contract import SCALE, Method
from headloc.methods.guided_greedy import check_short_list
from headloc.methods.rules import integer, zero_or_at_least
from headloc.methods.settings import MethodOptions, setting


@dataclass(frozen=True)
class ScreenedGreedyOptions(MethodOptions, section="screened_greedy"):
    """Screened greedy (search method screened_greedy, headloc.search.screened): group testing
    confirms a few heads alone (a head at the score's floor is set aside, the most damaging other
    joins the background), then greedy steps over short lists a gradient beside the background
    draws up, and a pair probe (gradients beside two random halves of the heads) for pairs that
    act only together, right after the first head and when a step finds nothing; stops at
    validation.top_k heads or when nothing lowers the score, then fills the top k with greedy steps
    below the noise (not found)."""

    # guided greedy's lists (docs/results/vs-greedy-smollm2.md)
    m: int = setting(10, integer(0), doc="Heads of largest estimated drop on each greedy step's short list.")
    m_abs: int = setting(10, integer(0), doc="""Heads of largest estimate of either sign on each greedy step's
                         short list; m and m_abs cannot both be 0.""")
    # a universal head and a synergy pair: three heads at the floor
    screen: int = setting(3, integer(1), doc="Heads group testing confirms alone before the greedy steps.")
    # 6 pairs; the planted pair ranked in the first 4 (a pair needs two heads: 1 is refused)
    pair_candidates: int = setting(4, zero_or_at_least(2, "no pair probe"), doc="""Heads of largest estimate
                                   beside the background or either half that each pair probe ablates two by two
                                   (n (n - 1) / 2 masks); 0 runs no probe, 1 is refused.""")
    # comparative's L1H0 ranked 2nd beside a half, 89th beside greedy's two heads (probe-leads.md)
    probe_leads: int = setting(2, integer(0), doc="""Heads of largest estimated drop beside each half of
                               the pair probe that join every later greedy step's short list (a head that
                               hurts only beside much damage shows there); 0 lists none.""")
    # antonyms' L0H7 was third beside L0H4 (held-out-tasks.md)
    floor_check: int = setting(3, integer(0), doc="""Heads of largest estimated drop measured beside a head the
                               screen finds at the score's floor: if one lowers the score by a fifth of the
                               head's own drop, the head is not at the floor and the two start the greedy
                               steps; 0 runs no check.""")
    # beside continent's first three heads (seed 0) greedy's fourth was 27th by estimated drop (deeper-lists.md)
    deepen: int = setting(3, integer(0), doc="""Batches of m heads a greedy step measures further down the
                          estimate's order where the m heads of largest estimated drop all raise the score
                          (there the estimate misleads), until one lowers it; 0 measures none, and with
                          m = 0 (no order of estimated drops) it does nothing.""")

    def __post_init__(self):
        super().__post_init__()
        check_short_list(self)


def choose_heads(estimate, score_sets, n_heads, params):
    from headloc.search.screened import screened_greedy

    o = params.options
    return screened_greedy(estimate, score_sets, n_heads, params.top_k, seed=params.seed, m=o.m, m_abs=o.m_abs,
                           screen=o.screen, pair_candidates=o.pair_candidates, probe_leads=o.probe_leads,
                           floor_check=o.floor_check, deepen=o.deepen)


def search_id(parts) -> str:
    o = parts.options
    return (f"screened_greedy_k{parts.top_k}_l{o.m}_a{o.m_abs}_g{o.screen}_p{o.pair_candidates}"
            f"_h{o.probe_leads}_f{o.floor_check}_d{o.deepen}_{parts.tail}{parts.repeat_suffix}")


# how to read its heatmap (the caption in Snakemake's report)
READING = """A chosen head's cell is the change in the task's score measured when it was found: alone for a
head set aside at the score's floor and for the screen's first head, beside the heads chosen before it
for a greedy step's head, with its partner beside them for a pair's. A head listed at some step but not
chosen shows the change measured for it beside that step's heads; a head never listed is 0 and ranked
by the last gradient. ``labels`` in recovery.json says which; ``details`` names the heads set aside,
the screen's, the pair, the heads a pair displaced (chosen by a step, then replaced by the pair) and
the heads taken below the noise after the search stopped short of its top k (ranked after the heads
found, never among them), and holds each pair probe (its best pair, that pair's drop, the steps' it
was weighed against).

""" + SCALE


METHODS = (
    Method(name="screened_greedy", kind="guided", algorithm=choose_heads, options=ScreenedGreedyOptions,
           search_id=search_id, marker="d", repeats=True,
           about="group testing alone, then greedy steps from gradients beside the chosen heads, then a pair probe",
           label="score change when found (alone, beside the heads before it, or with its pair's partner)",
           reading=READING),
)
