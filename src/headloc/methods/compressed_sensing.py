"""Compressed sensing (paper section 4): a random design of masks, each ablating a ``sparsity``
share of the heads, scored once; the Lasso of eq. (1) recovers every head's effect.

``cs_stratified`` ablates every head an almost equal number of times; ``cs_bernoulli`` draws each
entry independently (the textbook matrix). A smaller budget is the first rows of the full design.
"""

from headloc.methods.contract import Method, budget_id, lasso_reading, lasso_recover
from headloc.search.masks import bernoulli_masks, stratified_masks

LASSO_LABEL = "Lasso coefficient (score change when ablated)"

METHODS = (
    Method(
        name="cs_stratified", kind="masks", about="compressed sensing, balanced measurement matrix",
        label=LASSO_LABEL, reading=lasso_reading("stratified: every mask ablates the same number of heads"), marker="o", search_id=lambda parts: budget_id("cs_stratified", parts),
        algorithm=stratified_masks, recover=lasso_recover, budgeted=True, nested=True, repeats=True,
    ),
    Method(
        name="cs_bernoulli", kind="masks", about="compressed sensing, i.i.d. Bernoulli entries",
        label=LASSO_LABEL, reading=lasso_reading("Bernoulli: each head ablated independently"), marker="^", search_id=lambda parts: budget_id("cs_bernoulli", parts),
        algorithm=bernoulli_masks, recover=lasso_recover, budgeted=True, nested=True, repeats=True,
    ),
)
