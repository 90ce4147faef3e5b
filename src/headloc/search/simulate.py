"""A simulated model whose capability heads are known, to compare searches without a model
(benchmarks/simulate_search.py prints the comparison; docs/results/simulated-searches.md its results).
Worlds whose heads also act together: :mod:`headloc.search.simulate_interactions`.

The task: ``n_docs`` documents of ``n_choices`` choices, scored by the gold choice's mean
log-probability. Each document has a gold logit margin over its distractors (all distractors
share one logit), so its log-probability is ``-log(1 + (c - 1) exp(-margin))``: 0 when certain,
``log(1 / c)`` (chance) at margin 0. Planted heads (``World.planted``):

- a **universal** head: ablated, every document goes to chance (the score's floor);
- **role** heads with document shares (default 0.4, 0.25, 0.2, 0.15): ablated, their own
  documents go to chance;
- optionally one **redundant (OR) pair** carrying the last role: its documents go to chance only
  when both heads are ablated (either alone does the job). The pair's two heads are both planted,
  so the planted set then has one head more.

Every other head is the **tail**: ablating it shifts every margin by a small amount, drawn
``N(0, tau / s)`` with ``s`` the mean slope of the log-probability at the baseline margins, so a
tail head alone moves the score by about ``tau`` nats (sd). Shifts add up in margin; documents
sent to chance stay there. Scores are deterministic, as a model's on fixed documents are.

>>> world = make_world(seed=0, n_heads=64)
>>> scores = world.score(np.vstack([np.zeros(64), np.eye(64)[world.planted[0]]]))
>>> round(float(scores[1]), 4) == round(math.log(1 / 4), 4), bool(scores[0] > -0.2)
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from headloc.search.group_testing import GroupTesting
from headloc.search.masks import bernoulli_masks, stratified_masks
from headloc.search.recovery import LassoRecovery
from headloc.search.sequential import SequentialSearch
from headloc.search.thompson import ThompsonSampling

SHARES = (0.4, 0.25, 0.2, 0.15)
DESIGNS = {"stratified": stratified_masks, "bernoulli": bernoulli_masks}


@dataclass(frozen=True)
class World:
    """A simulated model: see the module docstring. ``planted``: universal, roles, then the pair."""

    margins: np.ndarray  # (D,) the documents' gold margins, unablated
    tail: np.ndarray  # (N,) each head's margin shift when ablated (0 for planted heads)
    kills: tuple[tuple[tuple[int, ...], np.ndarray], ...]  # (heads that must all be ablated, documents sent to chance)
    planted: tuple[int, ...]
    n_choices: int

    def score(self, masks) -> np.ndarray:
        """Each mask's score: the mean over documents of the gold's log-probability."""
        masks = np.atleast_2d(np.asarray(masks, dtype=float))
        margin = self.margins[None, :] + (masks @ self.tail)[:, None]
        logp = -np.logaddexp(0.0, math.log(self.n_choices - 1) - margin)
        for heads, docs in self.kills:
            killed = np.all(masks[:, list(heads)] > 0, axis=1)
            logp[np.ix_(killed, docs)] = math.log(1 / self.n_choices)
        return logp.mean(axis=1)


def make_world(seed: int, n_heads: int = 1024, n_docs: int = 20, n_choices: int = 4, shares=SHARES,
               tau: float = 0.01, or_pair: bool = False) -> World:
    """Planted heads at random places, documents split among the roles by ``shares``."""
    rng = np.random.default_rng([seed, 35])
    margins = rng.uniform(2.0, 5.0, n_docs)
    slope = np.mean(1 / (1 + np.exp(margins) / (n_choices - 1)))  # d logp / d margin = 1 - p
    n_planted = 1 + len(shares) + int(or_pair)
    planted = tuple(int(h) for h in rng.choice(n_heads, n_planted, replace=False))
    tail = rng.normal(0.0, tau / slope, n_heads)
    tail[list(planted)] = 0.0
    bounds = np.round(np.cumsum([0, *shares]) / sum(shares) * n_docs).astype(int)
    docs = [np.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    carriers = [(h,) for h in planted[1:1 + len(shares)]]
    if or_pair:
        carriers[-1] = tuple(planted[-2:])
    kills = (((planted[0],), np.arange(n_docs)), *zip(carriers, docs))
    return World(margins, tail, kills, planted, n_choices)


def recall(ranking, planted, k: int | None = None) -> float:
    """The share of the planted heads among the first ``k`` (default: as many as are planted)."""
    k = k or len(planted)
    return len(set(np.asarray(ranking)[:k].tolist()) & set(planted)) / len(planted)


def lasso_recalls(world: World, budgets, *, design: str = "stratified", sparsity: float = 0.05,
                  seed: int = 0) -> dict[int, float]:
    """Recall of compressed sensing (the Lasso with cross-validated penalty, as cs_stratified and
    cs_bernoulli recover) at each budget; smaller budgets are the first rows of the largest design."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    masks = DESIGNS[design](len(world.tail), max(budgets), sparsity, np.random.default_rng(seed))
    scores = world.score(masks)
    return {m: recall(LassoRecovery(alpha="cv", random_state=seed).fit(masks[:m], scores[:m]).ranking_,
                      world.planted) for m in budgets}


def search_recall(world: World, search: SequentialSearch) -> float:
    """Recall of a sequential search run to its end on ``world``."""
    _, _, found = search.complete(world.score)
    return recall(found.ranking, world.planted)


def sequential_searches(world: World, budget: int, seed: int, sparsity: float = 0.05) -> dict[str, SequentialSearch]:
    """The sequential searches compared on ``world`` (k = the number of planted heads, none beyond them)."""
    n_heads, k = len(world.tail), len(world.planted)
    chance = math.log(1 / world.n_choices)  # the score's floor: the reward's range is (chance, 0)
    thompson = dict(sparsity=sparsity, score_range=(chance, 0.0))
    return {
        "group_testing": GroupTesting(n_heads, budget, seed, k=k, extra_heads=0),
        "group_testing_rounds": GroupTesting(n_heads, budget, seed, k=k, extra_heads=0, masks_per_round=k + 3),
        "thompson_released": ThompsonSampling(n_heads, budget, seed, reward="score", **thompson),
        "thompson_damage": ThompsonSampling(n_heads, budget, seed, reward="damage", **thompson),
    }


def compare(seeds, budgets, *, sparsity: float = 0.05, **world_options) -> dict[str, dict[int, list[float]]]:
    """Recall of every search at every budget on the worlds of ``seeds`` (world and search share
    the seed): ``{search: {budget: [recall per seed]}}``. Searches: ``lasso_stratified``,
    ``lasso_bernoulli`` and :func:`sequential_searches`."""
    recalls: dict[str, dict[int, list[float]]] = {}
    for seed in seeds:
        world = make_world(seed, **world_options)
        for design in DESIGNS:
            found = lasso_recalls(world, budgets, design=design, sparsity=sparsity, seed=seed)
            for budget, value in found.items():
                recalls.setdefault(f"lasso_{design}", {}).setdefault(budget, []).append(value)
        for budget in budgets:
            for name, search in sequential_searches(world, budget, seed, sparsity).items():
                recalls.setdefault(name, {}).setdefault(budget, []).append(search_recall(world, search))
    return recalls


def recall_table(recalls: dict[str, dict[int, list[float]]], budgets) -> str:
    """A markdown table of :func:`compare`'s recalls: per search and budget M, the mean recall over
    seeds +- its standard error, then P(recall = 1) in brackets.

    >>> print(recall_table({"lasso_stratified": {50: [1.0, 0.5]}}, [50]))
    | search | M = 50 |
    |---|---:|
    | lasso_stratified | 0.75 +- 0.25 [0.50] |
    """
    lines = ["| search | " + " | ".join(f"M = {m}" for m in budgets) + " |", "|---|" + "---:|" * len(budgets)]
    for name, by_budget in recalls.items():
        cells = []
        for m in budgets:
            values = np.array(by_budget[m])
            error = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
            cells.append(f"{values.mean():.2f} +- {error:.2f} [{np.mean(values == 1):.2f}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
