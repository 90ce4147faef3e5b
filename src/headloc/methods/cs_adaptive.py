"""Two-stage compressed sensing (:mod:`headloc.search.adaptive`): a stratified screen of 70 % of
the budget over every head, then, unless its top k is already settled, masks over the heads it left
uncertain (step refine of :mod:`headloc.methods.steps`, which also gives the screen its share of the
budget); the Lasso fits both stages' rows. Each budget is its own search (stage 2 depends on stage
1's scores, so budgets do not nest)."""

from headloc.methods.contract import Method, budget_id, lasso_reading, lasso_recover
from headloc.search.masks import stratified_masks

METHODS = (
    Method(
        name="cs_adaptive", kind="masks", about="two-stage compressed sensing: a screen, then the uncertain heads",
        label="Lasso coefficient (score change when ablated)", marker="v",
        reading=lasso_reading("two stages: a stratified screen of every head, then masks over the heads it left uncertain"),
        search_id=lambda parts: budget_id("cs_adaptive", parts), algorithm=stratified_masks, recover=lasso_recover,
        budgeted=True, repeats=True, stages=2,
    ),
)
