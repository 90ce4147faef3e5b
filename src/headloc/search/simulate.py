"""A simulated model whose capability heads are known, to compare searches without a model
(benchmarks/simulate_search.py prints the comparison; docs/results/simulated-searches.md its results).

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


# ---------------------------------------------------------------- worlds with interactions

INTERACTIONS = {"roles": (0.2, 0.15, 0.1), "backup": 0.175, "redundant": 0.175, "synergy": 0.125}
KINDS = ("universal", "role", "backup", "redundant", "synergy")
PAIR_TAUS = 20  # a redundant pair's joint drop, at least, in units of tau


@dataclass(frozen=True)
class InteractionWorld(World):
    """A simulated model whose planted heads also act together (:func:`make_interaction_world`).
    ``kinds``: one of :data:`KINDS` per planted head, in the order of ``planted``."""

    kinds: tuple[str, ...] = ()

    def heads_of(self, kind: str) -> tuple[int, ...]:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        return tuple(h for h, k in zip(self.planted, self.kinds) if k == kind)


def make_interaction_world(seed: int, n_heads: int = 1024, n_docs: int = 40, n_choices: int = 4,
                           tau: float = 0.01, universal: bool = True, roles=INTERACTIONS["roles"],
                           backup: float | None = INTERACTIONS["backup"],
                           redundant: float | None = INTERACTIONS["redundant"],
                           synergy: float | None = INTERACTIONS["synergy"]) -> InteractionWorld:
    """A world like :func:`make_world` (margins, a tail of spread ``tau``, documents sent to chance)
    whose planted heads are, each optional (None or False leaves it out):

    - a **universal** head: ablated, every document goes to chance;
    - **role** heads with document shares ``roles``: ablated, their own documents go to chance;
    - a **backup** head of the first role head: its ``backup`` share of the documents goes to chance
      only when both are ablated (the first role head alone still does its own share: IOI's backup
      name movers take over what a name mover did; the backup alone does nothing);
    - a **redundant** (OR) pair: its documents go to chance only when both heads are ablated; each
      alone does nothing (below the tail's tau), together at least 20 tau (checked);
    - a **synergy** (AND) pair: either head ablated sends the pair's documents to chance, both
      together no further.

    Shares are of ``n_docs`` documents, in that order, and must sum to at most 1. Planted heads have
    no tail shift. ``kinds`` names each planted head's kind.
    """
    shares = [*roles, *(share for share in (backup, redundant, synergy) if share)]
    if any(share <= 0 for share in shares) or sum(shares) > 1 + 1e-9:
        raise ValueError(f"document shares must be positive and sum to at most 1, got {shares}")
    if backup and not roles:
        raise ValueError("a backup head needs a role head to back up (roles is empty)")
    kinds = ["universal"] * bool(universal) + ["role"] * len(roles) + ["backup"] * bool(backup) \
        + ["redundant"] * 2 * bool(redundant) + ["synergy"] * 2 * bool(synergy)
    rng = np.random.default_rng([seed, 42])
    margins = rng.uniform(2.0, 5.0, n_docs)
    slope = np.mean(1 / (1 + np.exp(margins) / (n_choices - 1)))  # d logp / d margin = 1 - p
    planted = tuple(int(h) for h in rng.choice(n_heads, len(kinds), replace=False))
    tail = rng.normal(0.0, tau / slope, n_heads)
    tail[list(planted)] = 0.0
    bounds = np.round(np.cumsum([0, *shares]) * n_docs).astype(int)
    docs = iter([np.arange(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])])
    heads = iter(planted)
    kills = [((next(heads),), np.arange(n_docs))] if universal else []
    role_heads = [next(heads) for _ in roles]
    kills += [((head,), next(docs)) for head in role_heads]
    if backup:
        kills.append(((role_heads[0], next(heads)), next(docs)))
    if redundant:
        pair, pair_docs = (next(heads), next(heads)), next(docs)
        kills.append((pair, pair_docs))
    if synergy:
        pair_docs = next(docs)
        kills += [((next(heads),), pair_docs), ((next(heads),), pair_docs)]
    world = InteractionWorld(margins, tail, tuple(kills), planted, n_choices, tuple(kinds))
    if redundant:
        both = np.zeros((2, n_heads))
        both[1, list(pair)] = 1
        unablated, ablated = world.score(both)
        joint = float(unablated - ablated)
        if joint < PAIR_TAUS * tau:
            raise ValueError(f"the redundant pair's {len(pair_docs)} of {n_docs} documents drop the score by "
                             f"{joint:.4f} = {joint / tau:.1f} tau together, below {PAIR_TAUS} tau: raise n_docs or "
                             f"the redundant share ({redundant})")
    return world


def recall_by_kind(ranking, world: InteractionWorld, k: int | None = None) -> dict[str, float]:
    """The share of each kind's planted heads among the first ``k`` of ``ranking`` (default: as many
    as are planted), for the kinds the world holds."""
    top = set(np.asarray(ranking)[: k or len(world.planted)].tolist())
    return {kind: np.mean([h in top for h in world.heads_of(kind)]) for kind in KINDS if world.heads_of(kind)}


def greedy_run(world: World, k: int, exclude=()) -> tuple[list[int], int]:
    """Greedy search (:mod:`headloc.search.greedy`) run in-process on ``world``: ``k`` rounds, each
    keeping the head whose addition to those chosen lowers the score most; ``exclude`` never chosen
    (the universal filter's heads). Returns its ranking and the masks it scored."""
    from headloc.search import greedy

    n_heads, chosen, spent = len(world.tail), [], 0
    for _ in range(k):
        masks = greedy.round_masks(n_heads, chosen, exclude)
        best, by_head = greedy.choose(masks, world.score(masks), chosen, exclude)
        chosen.append(best)
        spent += len(masks)
    return greedy.ranking(chosen, by_head, exclude), spent


def interaction_searches(world: InteractionWorld, budget: int, seed: int) -> dict[str, SequentialSearch]:
    """The group testing searches compared on an interaction world, told k = the planted heads, none more."""
    from headloc.search.conditional import ConditionalGroupTesting

    n_heads, k = len(world.tail), len(world.planted)
    return {
        "group_testing": GroupTesting(n_heads, budget, seed, k=k, extra_heads=0),
        "conditional_group_testing": ConditionalGroupTesting(n_heads, budget, seed, k=k, extra_heads=0),
        "conditional_pair_screen": ConditionalGroupTesting(n_heads, budget, seed, k=k, extra_heads=0, pair_screen=True),
    }


def compare_interactions(seeds, n_heads: int, budget: int, **world_options) -> list[dict]:
    """Every search and greedy on the interaction worlds of ``seeds`` (world and search share the
    seed): one row per search and seed with its evaluations and, per kind of planted head, the share
    found among the first K of its ranking with the universal head left out (K = the other planted
    heads; the workflow's tables drop universal heads so, and its greedy never chooses them), and
    whether the universal head was confirmed (greedy: None, it is left out of its rounds)."""
    rows = []
    for seed in seeds:
        world = make_interaction_world(seed, n_heads=n_heads, **world_options)
        universal = world.heads_of("universal")
        runs = {name: search.complete(world.score)[2] for name, search in interaction_searches(world, budget, seed).items()}
        found = {name: ([h for h in r.ranking.tolist() if h not in universal], r.n_evals) for name, r in runs.items()}
        found["greedy"] = greedy_run(world, len(world.planted) - len(universal), exclude=universal)
        k = len(world.planted) - len(universal)
        for name, (ranking, n_evals) in found.items():
            recalls = {kind: float(r) for kind, r in recall_by_kind(ranking, world, k).items() if kind != "universal"}
            confirmed = [runs[name].labels[h].startswith("confirmed") for h in universal] if name in runs else []
            rows.append({"search": name, "seed": seed, "n_heads": n_heads, "n_evals": n_evals, **recalls,
                         "universal": float(np.mean(confirmed)) if confirmed else None,
                         "all": recall(ranking, [h for h in world.planted if h not in universal], k)})
    return rows


def search_bounds(n_heads: int, k: int) -> tuple[float, float]:
    """Tests needed to find ``k`` of ``n_heads`` heads: the quantitative (coin-weighing) information
    bound log2 C(N, k) / log2(k + 1), for tests that return how many, and the binary one
    k log2(N / k) + k, for yes/no tests.

    >>> [round(b, 1) for b in search_bounds(1024, 5)]
    [16.7, 43.4]
    """
    return math.log2(math.comb(n_heads, k)) / math.log2(k + 1), k * math.log2(n_heads / k) + k


def interaction_table(rows: list[dict]) -> str:
    """A markdown table of :func:`compare_interactions` rows: per world size and search, the mean
    recall of each kind of head, P(all found), the mean evaluations and their share of greedy's."""
    kinds = [kind for kind in KINDS if kind in rows[0]]
    lines = ["| heads | search | " + " | ".join(kinds) + " | P(all) | evaluations | of greedy's |",
             "|---:|---|" + "---:|" * (len(kinds) + 3)]
    for n_heads in sorted({row["n_heads"] for row in rows}):
        of_size = [row for row in rows if row["n_heads"] == n_heads]
        greedy = np.mean([row["n_evals"] for row in of_size if row["search"] == "greedy"])
        for name in dict.fromkeys(row["search"] for row in of_size):
            mine = [row for row in of_size if row["search"] == name]
            cells = ["" if mine[0][kind] is None else f"{np.mean([row[kind] for row in mine]):.2f}" for kind in kinds]
            evals = np.mean([row["n_evals"] for row in mine])
            lines.append(f"| {n_heads:,} | {name} | " + " | ".join(cells) +
                         f" | {np.mean([row['all'] == 1 for row in mine]):.2f} | {evals:.0f} | {evals / greedy:.1%} |")
    return "\n".join(lines)
