"""Two-stage compressed sensing (:mod:`headloc.search.adaptive`): a stratified screen of 70 % of
the budget over every head, then, unless its top k is already settled, masks over the heads it left
uncertain (rule refine_masks); the Lasso fits both stages' rows. Each budget is its own search
(stage 2 depends on stage 1's scores, so budgets do not nest)."""

from headloc.methods.contract import Method, budget_id, lasso_reading, lasso_recover
from headloc.search.masks import stratified_masks


def screen(n_heads, n_masks, sparsity, rng):
    """Stage 1: a stratified design of the screen's share of the budget."""
    from headloc.search.adaptive import stage_sizes  # sklearn: not at registry import

    return stratified_masks(n_heads, stage_sizes(n_masks)[0], sparsity, rng)


METHODS = (
    Method(
        name="cs_adaptive", kind="masks", about="two-stage compressed sensing: a screen, then the uncertain heads",
        label="Lasso coefficient (score change when ablated)", marker="v",
        reading=lasso_reading("two stages: a stratified screen of every head, then masks over the heads it left uncertain"),
        search_id=lambda parts: budget_id("cs_adaptive", parts), design=screen, recover=lasso_recover,
        budgeted=True, repeats=True, stages=2,
    ),
)
