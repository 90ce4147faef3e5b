"""Sparse recovery of per-head effects from masked scores (paper eq. 1).

Given the measurement matrix ``Phi`` (M x N, 1 = ablated) and the scores ``y`` (M,), the Lasso

    x_hat = argmin_x  1 / (2 M) * ||y - (b0 + Phi x)||_2^2  +  alpha * ||x||_1

estimates ``x_j``, the change in score caused by ablating head ``j``; ``b0`` is the unablated
baseline. Heads are ranked by most negative coefficient (largest damage first).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Lasso, LassoCV
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted, validate_data

from headloc.search import greedy


def marginal_effects(phi: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean score with each head ablated minus mean score without it (0 where a head never varies)."""
    phi = np.asarray(phi, dtype=bool)
    y = np.asarray(y, dtype=float)
    effects = np.zeros(phi.shape[1])
    for j in range(phi.shape[1]):
        on, off = y[phi[:, j]], y[~phi[:, j]]
        if len(on) and len(off):
            effects[j] = on.mean() - off.mean()
    return effects


def rank_heads(coef: np.ndarray, tie_break: np.ndarray) -> np.ndarray:
    """Head indices, most negative ``coef`` first; equal coefficients (often exact zeros of the
    Lasso) are ordered by ``tie_break``, most negative first, then by index."""
    return np.lexsort((np.arange(len(coef)), tie_break, coef))


class LassoRecovery(RegressorMixin, BaseEstimator):
    """Lasso with intercept over (Phi, y), ranking heads by their estimated effect.

    Objective: ``1 / (2 M) * ||y - b0 - Phi x||^2 + alpha * ||x||_1`` (scikit-learn's scaling:
    ``alpha`` is relative to M, the number of masks, and to the units of ``y``).

    Parameters
    ----------
    alpha : float or "cv"
        A fixed penalty, or ``"cv"``: choose it by ``cv``-fold cross-validation over
        scikit-learn's default path of 100 alphas (the one with the lowest mean squared error).
    cv : int
        Folds for ``alpha="cv"`` (shuffled with ``random_state``), capped at M.
    fit_intercept : bool
        Fit ``b0``; the paper's eq. (1) does.
    positive : bool
        Force non-negative effects (not used by the paper).
    random_state : int or None
        Seed for the fold shuffling and the coordinate-descent order.

    Attributes
    ----------
    coef_ : ndarray (N,)        estimated effect of ablating each head
    intercept_ : float          estimated unablated score b0
    alpha_ : float              the penalty used
    r2_ : float                 R^2 of the fit on (Phi, y)
    ranking_ : ndarray (N,)     head indices, most damaging first; ties (e.g. zero
                                coefficients) broken by the marginal effect of each head
    n_evals_ : int              number of masked evaluations used (M)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> phi = (rng.random((60, 40)) < 0.1).astype(int)
    >>> y = 0.8 - 0.5 * phi[:, 7] + 0.01 * rng.standard_normal(60)
    >>> LassoRecovery(alpha=0.005).fit(phi, y).top_k(1).tolist()
    [7]
    """

    def __init__(self, alpha="cv", cv=5, fit_intercept=True, positive=False, random_state=None):
        self.alpha = alpha
        self.cv = cv
        self.fit_intercept = fit_intercept
        self.positive = positive
        self.random_state = random_state

    def fit(self, phi, y):
        phi, y = validate_data(self, phi, y, dtype=float, y_numeric=True)
        options = dict(fit_intercept=self.fit_intercept, positive=self.positive,
                       random_state=self.random_state, max_iter=100_000)
        if self.alpha == "cv":
            if len(y) < 2:
                raise ValueError(f"alpha='cv' needs at least 2 masks to cross-validate (n_samples = {len(y)})")
            folds = KFold(min(self.cv, len(y)), shuffle=True, random_state=self.random_state)
            model = LassoCV(cv=folds, **options).fit(phi, y)
            self.alpha_ = float(model.alpha_)
        elif isinstance(self.alpha, (int, float)) and self.alpha >= 0:
            model = Lasso(alpha=float(self.alpha), **options).fit(phi, y)
            self.alpha_ = float(self.alpha)
        else:
            raise ValueError(f"alpha must be a non-negative number or 'cv', got {self.alpha!r}")
        self.coef_ = model.coef_.copy()
        self.intercept_ = float(model.intercept_)
        self.r2_ = float(model.score(phi, y))
        self.ranking_ = rank_heads(self.coef_, marginal_effects(phi, y))
        self.n_evals_ = int(len(y))
        return self

    def predict(self, phi):
        check_is_fitted(self)
        phi = validate_data(self, phi, dtype=float, reset=False)
        return phi @ self.coef_ + self.intercept_

    def top_k(self, k: int) -> np.ndarray:
        """The ``k`` most damaging heads (flat indices)."""
        if not 1 <= k <= len(self.ranking_):
            raise ValueError(f"k must lie in 1..{len(self.ranking_)} (number of heads), got {k}")
        return self.ranking_[:k]


def top_k_probability(phi, y, *, alpha: float, k: int, n_boot: int = 100, random_state=0) -> np.ndarray:
    """How settled each head's place in the top ``k`` is: the share of ``n_boot`` bootstrap refits
    (the masks resampled with replacement, the Lasso at the fixed penalty ``alpha``, e.g. the one
    cross-validation chose) in which the head is among the ``k`` most damaging.

    A head near 1 is in the top k whichever masks are drawn; heads sharing the rest spread over the
    remaining places. The probabilities sum to ``k``.

    >>> rng = np.random.default_rng(0)
    >>> phi = (rng.random((80, 30)) < 0.1).astype(int)
    >>> y = 0.8 - 0.5 * phi[:, 7] - 0.3 * phi[:, 3] + 0.01 * rng.standard_normal(80)
    >>> p = top_k_probability(phi, y, alpha=0.002, k=2, n_boot=50)
    >>> p[[7, 3]].tolist(), round(float(p.sum()), 6)
    ([1.0, 1.0], 2.0)
    """
    phi, y = np.asarray(phi, dtype=float), np.asarray(y, dtype=float)
    n_masks, n_heads = phi.shape
    if not 1 <= k <= n_heads:
        raise ValueError(f"k must lie in 1..{n_heads} (number of heads), got {k}")
    rng = np.random.default_rng(random_state)
    counts = np.zeros(n_heads)
    for _ in range(n_boot):
        rows = rng.integers(0, n_masks, n_masks)
        fit = LassoRecovery(alpha=alpha, random_state=random_state).fit(phi[rows], y[rows])
        counts[fit.ranking_[:k]] += 1
    return counts / n_boot


class SingleHeadRecovery(LassoRecovery):
    """One-shot greedy: each head's effect is its single-head score minus the unablated score.

    Expects the matrix of :func:`headloc.search.masks.single_head_masks`: a zero row, then the identity.
    """

    status = "measured"  # each head's value is a difference of two scored masks (headloc.search.evidence)

    def __init__(self):
        super().__init__(alpha=0.0)

    def fit(self, phi, y):
        phi, y = validate_data(self, phi, y, dtype=float, y_numeric=True)
        n_heads = phi.shape[1]
        if phi.shape != (n_heads + 1, n_heads) or phi[0].any() or not np.array_equal(phi[1:], np.eye(n_heads)):
            raise ValueError("one-shot greedy expects a zero row followed by the identity matrix")
        self.intercept_ = float(y[0])
        self.coef_ = y[1:] - y[0]
        self.alpha_ = 0.0
        self.r2_ = 1.0
        self.ranking_ = rank_heads(self.coef_, np.zeros(n_heads))
        self.n_evals_ = int(len(y))
        return self


def greedy_recovery(rounds: list[dict], names: list[str], exclude: list[str] = ()) -> dict:
    """Greedy search's result from its rounds (the ``chosen.json`` records, in order).

    Ranking: the chosen heads in the order chosen, then the rest by their score in the last round.
    Coefficients (so that every method reports "change in score when this head is ablated"): a
    chosen head's is the score change its addition caused in its round; any other head's, the
    change it would have caused in the last round; a head in ``exclude`` (never a candidate), the
    change it caused alone in round 1 (``excluded_scores``), None if that was not recorded.

    >>> rounds = [{"chosen": ["L0H1"], "score": 0.5, "unablated": 0.9, "n_evals": 3,
    ...            "scores": {"L0H0": 0.8, "L0H1": 0.5}},
    ...           {"chosen": ["L0H1", "L0H0"], "score": 0.4, "unablated": 0.9, "n_evals": 4,
    ...            "scores": {"L0H0": 0.4}}]
    >>> found = greedy_recovery(rounds, ["L0H0", "L0H1"])
    >>> found["ranking"], {h: round(c, 2) for h, c in found["coef"].items()}, found["n_evals"]
    (['L0H1', 'L0H0'], {'L0H0': -0.1, 'L0H1': -0.4}, 4)
    """
    last = rounds[-1]
    before = [rounds[i - 1]["score"] if i else last["unablated"] for i in range(len(rounds))]
    coef = {name: score - before[-1] for name, score in last["scores"].items()}
    coef.update({r["chosen"][-1]: r["score"] - b for r, b in zip(rounds, before)})
    last_scores = np.array([last["scores"].get(name, np.nan) for name in names])
    chosen = [names.index(name) for name in last["chosen"]]
    excluded = [names.index(name) for name in exclude]
    alone = {name: score - last["unablated"] for name, score in rounds[0].get("excluded_scores", {}).items()}
    return {
        "n_evals": last["n_evals"], "alpha": None, "r2": None, "intercept": last["unablated"],
        "ranking": [names[i] for i in greedy.ranking(chosen, last_scores, exclude=excluded)],
        "coef": {name: coef.get(name, alone.get(name)) for name in names},
        "excluded": list(exclude),
    }
