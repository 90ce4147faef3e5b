"""Thompson sampling over heads: the search of the paper's released code that the paper does not
describe (search method ``thompson``).

locuslab/llm-components, compressed_sensing.py (``--strategy thompson``, ``--thompson_iters 50``,
``HeadImportanceIdentifier.thompson_sampling``, lines 134-182 of commit ba4f400): every head has a
Beta(1, 1) posterior ``(a, b)``. Each iteration draws one sample per head, ablates the
``int(N * sparsity)`` heads with the highest draws, scores the model once and updates every head
with the reward ``r`` (lines 152-161)::

    reward = acc #1-acc # Minimize accuracy
    alphas[selected] += reward;           betas[selected] += (1 - reward)
    ablated = np.where(mask == 0)[0]      # despite its name: the heads *kept*
    alphas[ablated] += (1 - reward) * 0.5; betas[ablated] += reward * 0.5

The heads are ranked by the posterior mean ``a / (a + b)``, highest first (its printed top 5).

As released (``reward="score"``) the reward is the score itself, so the sampler favours heads
whose ablation leaves the score *high*, and its top heads are the ones the task needs least: the
comment ``#1-acc`` suggests the damage was meant. ``reward="damage"`` rewards the drop instead:
``r = (baseline - score) / (baseline - low)``, the share of the way from the unablated score to
the floor ``low`` the mask went, so the sampler favours heads whose ablation hurts.

A reward must lie in [0, 1] for the Beta update (the released code uses accuracy). Scores are
mapped through ``score_range = (low, high)``, the metric's worst and best (default (0, 1),
accuracy), and clipped to it: ``r = (score - low) / (high - low)`` as released.

Differences from the released code, none of which changes the update: the draws come from
``numpy.random.default_rng(seed)`` (the released code uses numpy's global state, unseeded); the
unablated model is scored first (row 0 of every sequential record; the damage reward needs it), so a
budget of M masks runs M - 1 iterations; a mask drawn again is not scored again (scores are
deterministic, the update uses its recorded score), so a search may use fewer than M evaluations;
``masks_per_round`` draws that many masks from the same posterior before updating (1: as released).

>>> ablated = np.array([True, False, False])
>>> a, b = update(np.ones(3), np.ones(3), ablated, reward=0.8)
>>> a.tolist(), b.tolist()
([1.8, 1.1, 1.1], [1.2, 1.4, 1.4])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from headloc.search.sequential import (Memory, Proposals, Recovery, SequentialSearch, check_choice,
                                       check_positive_int)

REWARDS = ("score", "damage")


def update(a: np.ndarray, b: np.ndarray, ablated: np.ndarray, reward: float) -> tuple[np.ndarray, np.ndarray]:
    """The released update (module docstring): new ``(a, b)`` after one mask with ``reward`` in [0, 1]."""
    ablated = np.asarray(ablated, dtype=bool)
    a, b = a.copy(), b.copy()
    a[ablated] += reward
    b[ablated] += 1 - reward
    a[~ablated] += (1 - reward) * 0.5
    b[~ablated] += reward * 0.5
    return a, b


@dataclass(frozen=True)
class ThompsonSampling(SequentialSearch):
    """Thompson sampling (module docstring). ``n_masks``: masks including the baseline row."""

    sparsity: float = field(kw_only=True)  # sparsity, reward, score_range: the caller's (the method's)
    reward: str = field(kw_only=True)
    score_range: tuple[float, float] = field(kw_only=True)
    masks_per_round: int = 1

    def __post_init__(self):
        super().__post_init__()
        if not 0 < self.sparsity < 1 or int(self.n_heads * self.sparsity) < 1:
            raise ValueError(f"sparsity must lie in (0, 1) and ablate at least one of the {self.n_heads} heads "
                             f"(int(N * sparsity) >= 1), got {self.sparsity!r}")
        check_choice("reward", self.reward, REWARDS)
        low, high = self.score_range
        if not low < high:
            raise ValueError(f"score_range must be (worst, best) with worst < best, got {self.score_range!r}")
        check_positive_int("masks_per_round", self.masks_per_round)

    @property
    def n_ablated(self) -> int:
        return int(self.n_heads * self.sparsity)  # as released: int() rounds down

    def rewarded(self, score: float, baseline: float) -> float:
        """The reward of one mask's score, in [0, 1]."""
        low, high = self.score_range
        if self.reward == "score":
            return float(np.clip((score - low) / (high - low), 0, 1))
        if baseline <= low:
            raise ValueError(f"the damage reward needs an unablated score above the floor {low}, got {baseline}")
        return float(np.clip((baseline - score) / (baseline - low), 0, 1))

    def propose(self) -> Proposals:
        memory, rng = Memory(self.n_heads), np.random.default_rng(self.seed)
        (baseline,) = yield from memory.measure([()])
        a, b = np.ones(self.n_heads), np.ones(self.n_heads)
        iterations = self.n_masks - 1
        for start in range(0, iterations, self.masks_per_round):
            draws = [self.select(rng.beta(a, b)) for _ in range(min(self.masks_per_round, iterations - start))]
            scores = yield from memory.measure(draws)
            for heads, score in zip(draws, scores):
                a, b = update(a, b, memory.row(heads).astype(bool), self.rewarded(score, baseline))
        mean = a / (a + b)
        ranking = np.argsort(-mean, kind="stable")
        labels = (f"posterior mean of the reward ({self.reward})",) * self.n_heads
        return Recovery(ranking, mean, labels, len(memory), float(baseline),
                        {"a": a.tolist(), "b": b.tolist(), "iterations": iterations}, per_head_keys=("a", "b"))

    def select(self, draws: np.ndarray) -> np.ndarray:
        """The heads with the highest draws (as released: the last ``n_ablated`` of an argsort)."""
        return np.sort(np.argsort(draws)[-self.n_ablated:])
