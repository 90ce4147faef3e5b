"""Thompson sampling as in the paper's released code (:mod:`headloc.search.thompson`; the paper
does not describe it): a Beta posterior per head, each iteration ablates the ``search.sparsity``
share of heads with the highest draws and updates every head from the score. ``search.n_masks``
masks (the unablated row included). Options: section ``thompson`` (``reward``: ``score`` as
released, which favours heads whose ablation leaves the score high, or ``damage``;
``score_range``: the metric's worst and best, in its own units, to map a score into [0, 1])."""

from dataclasses import dataclass

from headloc.methods.contract import Method, budget_id
from headloc.methods.rules import choice, numbers
from headloc.methods.settings import MethodOptions, setting

RELEASED_RANGE = (0, 1)  # the released code's accuracy: a score_range its search id does not name


@dataclass(frozen=True)
class ThompsonOptions(MethodOptions, section="thompson"):
    """Thompson sampling as in the paper's released code (search method thompson,
    headloc.search.thompson): search.n_masks - 1 iterations, each ablating search.sparsity of the
    heads."""

    reward: str = setting("score", choice("score", "damage"), doc="""score: the released code's reward, the
                          masked score itself, which favours heads whose ablation leaves the score HIGH;
                          damage: the drop from the unablated score, which favours heads whose ablation
                          hurts.""")
    score_range: tuple[float, float] = setting(RELEASED_RANGE, numbers(2), doc="""[worst, best] of the scored
                                               metric in its own units (a perplexity: [large, 1]); a score is
                                               mapped to (score - worst) / (best - worst) and clipped to
                                               [0, 1] (the released code's accuracy: [0, 1]).""")


def build(n_heads, params):
    from headloc.search.thompson import ThompsonSampling

    worst, best = params.options.score_range
    if (worst >= best) if params.higher_is_better else (worst <= best):
        direction = "higher" if params.higher_is_better else "lower"
        raise ValueError(f"thompson.score_range must be [worst, best] of the metric, in its own units: for a "
                         f"{direction}-is-better metric worst is the {'smaller' if direction == 'higher' else 'larger'}"
                         f" (e.g. {'[0, 1]' if direction == 'higher' else '[1000, 1] for a perplexity'}), "
                         f"got {list(params.options.score_range)!r}")
    # the search reads higher-is-better scores: a lower-is-better metric's range is negated with them
    low, high = (worst, best) if params.higher_is_better else (-worst, -best)
    return ThompsonSampling(n_heads=n_heads, n_masks=params.n_masks, seed=params.seed, sparsity=params.sparsity,
                            reward=params.options.reward, score_range=(float(low), float(high)))


def search_id(parts) -> str:
    o = parts.options
    worst, best = o.score_range
    scale = "" if o.score_range == RELEASED_RANGE else f"_v{worst:g}to{best:g}"
    return budget_id("thompson", parts, o.reward + scale)


# how to read its heatmap (the caption in Snakemake's report)
READING = """Each cell is the head's posterior mean reward a / (a + b), in [0, 1]: the heads are ranked by it,
highest first. With ``thompson.reward: score`` (the released code's rule) the reward is the
score of the masks that ablated the head, so a high cell is a head whose ablation left the task's
score HIGH: the top heads are the ones the task needs least. With ``damage`` the reward is
the share of the way from the unablated score to the floor a mask went: a high cell is a
head whose ablation hurt. The red-blue scale is centred at 0, so every cell here is blue."""


METHODS = (
    Method(name="thompson", kind="sequential", algorithm=build, options=ThompsonOptions, search_id=search_id,
           budgeted=True, repeats=True, marker="h", label="posterior mean of the reward (Thompson sampling)",
           about="Thompson sampling as in the released code (its reward: the score, as released, or the damage)",
           reading=READING),
)
