"""Simulated worlds whose planted heads also act together: a backup head, a redundant (OR) pair and a
synergy (AND) pair beside the universal and role heads, and group testing, conditional group testing
and greedy compared on them (benchmarks/interaction_search.py prints the comparison;
docs/results/simulated-searches.md its results). Apart from :mod:`headloc.search.simulate`, whose
world and recall it builds on: that module compares searches on heads that act alone, this one the
searches meant for heads that act together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from headloc.search.group_testing import GroupTesting
from headloc.search.sequential import SequentialSearch
from headloc.search.simulate import World, recall

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
