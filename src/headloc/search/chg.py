"""Causal Head Gating (search method ``chg``; Nam et al. 2025, ../shared/chg-paper.md).

One gate per head, ``G = sigmoid(theta)``, scales the head's output (``headloc.model.ablation``'s hook,
so every architecture headloc supports). The model is frozen; the gates minimise the paper's eq. (1)

    L(G) = NLL(gold continuations | G)  -  lambda * mean_heads clip(theta, -clip, clip)

where NLL is each document's mean next-token negative log-likelihood over its gold continuation
tokens, averaged over a minibatch (:mod:`headloc.engine.gold_scoring`; logits only at those positions),
and ``theta`` is the inverse sigmoid of ``G``, clipped so the regulariser's gradient vanishes past
``|theta| = clip``. Eq. (1) writes both terms as sums; the authors' code (``CHGTrainer.get_loss``
in the paper's repository) averages both, as here, and ``lambda = 0.1`` is on that scale: with
sums over SmolLM2's 270 heads the regulariser is 270 times stronger and the G- fit removes heads
the task needs (measured: held-out NLL 0.57 -> 5-8 nats). Each row's gradient is clipped to norm
``grad_norm`` (1.0, also the authors' code) before Adam's step.
Three fits, as the paper's section 3.2 and appendix 6.2:

1. ``lambda = 0`` from ``G ~ U(0, 1)``: a shared start ``G0``;
2. from ``G0``, ``lambda = +lam``: pushes irrelevant gates to 1; the result is ``G+``;
3. from ``G0``, ``lambda = -lam``: pushes irrelevant gates to 0; the result is ``G-``.

The taxonomy (paper Table 1): facilitation ``G-`` (kept although pushed out), interference
``1 - G+`` (dropped although pushed in), irrelevance ``G+ x (1 - G-)`` (Table 1's metric; the
paper's section 3.3 text writes ``G- x (1 - G+)``, which is high for no role of Table 1, so
Table 1 is followed here). Heads are ranked by facilitation.

What headloc adds to the paper's recipe, after a trial of the reference package on SmolLM2 (gates
ending almost binary, seeds agreeing poorly, NLL on the training prompts falling to ~0):

* **Seeds as batch rows.** ``seeds`` gates are fitted at once: every document runs once per gate
  in adjacent batch rows (a ``[rows, layers, heads]`` gate), and the ``G+`` and ``G-`` fits of all
  seeds share passes too (2 x seeds rows per document). A seed sets its row's initial gates;
  the minibatches are the same for every row. Scores are means over seeds; the spread is reported
  (per-head standard deviation, mean pairwise Spearman correlation between seeds).
* **Early stopping on held-out documents.** A ``holdout`` fraction of the documents is never
  trained on. Every ``eval_every`` updates each row's objective (its stage's eq. (1), NLL on the
  held-out documents) is computed; a row keeps its best gates and stops after ``patience``
  checks without improvement; a stage ends when every row has stopped or after its steps.
* **Starting gates within the clip.** The initial ``U(0, 1)`` gates' logits are clipped to
  ``[-clip, clip]`` (``U`` within about 0.018..0.982 for clip 4): past the clip the regulariser has no
  gradient, so an irrelevant head drawn there would never move in the G+ / G- fits and would read
  as interfering or facilitating by the luck of its draw.
* **Explicit ties.** Ranking key: facilitation (mean G- over seeds, float64 from the logits, so
  gates saturated in float32 are still ordered), then higher mean G+ (lower interference), then
  the lower flat head index.
* **Honest cost** (:class:`headloc.engine.gradient_result.Cost`): every fwd+bwd pass and forward pass, their
  rows and tokens, and the equivalent in masked evaluations (fwd+bwd = 3 forwards).

Defaults are the paper's appendix 6.2 ("Training details"): Adam; the ``lambda = 0`` fit for 500
updates with the learning rate decaying linearly from 0.1 to 0.01; ``G+`` and ``G-`` for 500
updates each with ``lambda = +-0.1``, learning rate 0.5 -> 0.1; regulariser clipped at +-4;
batches of 64 documents; 10 seeds in the paper (4 here by default: the spread is what matters
for a ranking); gradient-norm clip 1.0 and the averaging of eq. (1) from the authors' code.
``holdout``, ``eval_every`` and ``patience`` are headloc's.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import numpy as np
import torch
from scipy.stats import spearmanr

from headloc.heads import HeadGeometry
from headloc.engine.gold_scoring import frozen, pad_id_of
from headloc.engine.gradient_result import Cost, MethodResult, head_map, total_tokens
from headloc.engine.supervision import Example
from headloc.search.chg_fit import _Fitter, _Stage

TIE_RULE = ("facilitation (mean G- over seeds) descending, then mean G+ descending, "
            "then flat head index (layer * n_heads + head) ascending")


def chg(model, examples: Sequence[Example], *, seeds: Sequence[int] = (0, 1, 2, 3), lam: float = 0.1,
        clip: float = 4.0, batch_size: int = 64, init_steps: int = 500, init_lr: tuple[float, float] = (0.1, 0.01),
        fit_steps: int = 500, fit_lr: tuple[float, float] = (0.5, 0.1), holdout: float = 0.2,
        grad_norm: float | None = 1.0, eval_every: int = 25, patience: int = 4, split_seed: int = 0,
        rows_per_pass: int | None = None,
        pad_id: int | None = None, max_length: int | None = None) -> MethodResult:
    """Fit CHG gates on ``examples`` and rank heads by facilitation (see the module docstring).

    Parameters
    ----------
    model : a transformers causal LM headloc can gate; its weights are not changed.
    examples : the identification documents' (context, gold continuation) pairs.
    seeds : one gate row per seed (its initial gates ``U(0, 1)`` come from ``torch.Generator(seed)``).
    lam : |lambda| of the G+ and G- fits (paper: 0.1).
    clip : the clip of the inverse-sigmoid regulariser (paper: 4).
    batch_size : documents per update (paper: 64); all training documents when fewer.
    init_steps, init_lr : updates and (first, last) learning rate of the lambda = 0 fit (paper: 500,
        0.1 -> 0.01, linear).
    fit_steps, fit_lr : the same for the G+ and G- fits (paper: 500, 0.5 -> 0.1).
    grad_norm : each row's gradient is scaled down to this norm before Adam's step (the authors'
        code: 1.0); None: no clipping.
    holdout : fraction of documents held out for early stopping (at least one when > 0 and there
        are two or more documents); 0 trains every stage for all its steps.
    eval_every, patience : a held-out check every ``eval_every`` updates; a row stops after
        ``patience`` checks without a better held-out objective and keeps its best gates.
    split_seed : seeds the held-out split and the minibatch order.
    rows_per_pass : cap on rows (documents x gates) in one forward pass (gradients are accumulated);
        default: a whole minibatch in one pass.
    pad_id, max_length : as in :func:`headloc.engine.gold_scoring.make_batch`.

    Returns
    -------
    MethodResult: ``ranking`` by facilitation (``TIE_RULE``), ``effects = -facilitation``, and in
    ``extra`` the mean and spread of G+, G- and G0 per head, the taxonomy scores, the seed
    agreement, the held-out split, each stage's early stopping, and the hyperparameters.
    """
    _check(seeds=seeds, lam=lam, clip=clip, batch_size=batch_size, init_steps=init_steps, fit_steps=fit_steps,
           holdout=holdout, eval_every=eval_every, patience=patience, rows_per_pass=rows_per_pass, examples=examples)
    geometry = HeadGeometry.of(model.config)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(int(split_seed))
    order = torch.randperm(len(examples), generator=generator).tolist()
    n_holdout = 0 if holdout == 0 or len(examples) < 2 else min(len(examples) - 1, max(1, round(holdout * len(examples))))
    held = sorted(order[:n_holdout])
    train = [examples[i] for i in sorted(order[n_holdout:])]
    held_out = [examples[i] for i in held]
    cost = Cost(eval_tokens=total_tokens(examples))
    fitter = _Fitter(model, train, held_out, batch_size=batch_size, rows_per_pass=rows_per_pass,
                     pad=pad_id_of(model=model) if pad_id is None else pad_id, max_length=max_length, clip=clip,
                     grad_norm=grad_norm, cost=cost, generator=generator, device=device)
    n_seeds = len(seeds)
    start = torch.stack([
        torch.logit(torch.rand(geometry.n_layers, geometry.n_heads, generator=torch.Generator().manual_seed(int(s)))
                    ).clamp(-clip, clip)
        for s in seeds
    ]).to(device)
    stopping = dict(eval_every=eval_every, patience=patience)
    started = time.perf_counter()
    with frozen(model):
        theta0, stage0 = fitter.fit("lambda=0", start, [0.0] * n_seeds, steps=init_steps, lr=init_lr, **stopping)
        both = torch.cat([theta0, theta0])
        signs = [lam] * n_seeds + [-lam] * n_seeds
        theta_pm, stage_pm = fitter.fit("lambda=+-", both, signs, steps=fit_steps, lr=fit_lr, **stopping)
    cost.seconds = time.perf_counter() - started

    def gates(theta):  # [seeds, heads] float64
        return torch.sigmoid(theta.detach().double().cpu()).reshape(theta.shape[0], -1).numpy()

    g0, g_plus, g_minus = gates(theta0), gates(theta_pm[:n_seeds]), gates(theta_pm[n_seeds:])
    facilitation = g_minus.mean(0)
    interference = 1.0 - g_plus.mean(0)
    irrelevance = (g_plus * (1.0 - g_minus)).mean(0)
    ranking = rank_by_facilitation(g_minus, g_plus)
    split_stage = _split_stage(stage_pm, n_seeds)
    extra = {
        "g_minus": head_map(facilitation, geometry),
        "g_plus": head_map(g_plus.mean(0), geometry),
        "g_init": head_map(g0.mean(0), geometry),
        "facilitation": head_map(facilitation, geometry),
        "interference": head_map(interference, geometry),
        "irrelevance": head_map(irrelevance, geometry),
        "g_minus_std": head_map(g_minus.std(0), geometry),
        "g_plus_std": head_map(g_plus.std(0), geometry),
        "seed_spearman": {"g_minus": mean_pairwise_spearman(g_minus), "g_plus": mean_pairwise_spearman(g_plus)},
        "per_seed": {"seeds": [int(s) for s in seeds], "g_minus": g_minus.tolist(), "g_plus": g_plus.tolist(),
                     "g_init": g0.tolist()},
        "saturated": {"g_minus_above_0.999_all_seeds": int((g_minus > 0.999).all(0).sum()),
                      "g_minus_below_0.001_all_seeds": int((g_minus < 0.001).all(0).sum())},
        "tie_rule": TIE_RULE,
        "split": {"train_doc_ids": [e.doc_id for e in train], "holdout_doc_ids": [e.doc_id for e in held_out]},
        "stages": {"init": vars(stage0), "g_plus": split_stage[0], "g_minus": split_stage[1]},
        "hyperparameters": {"seeds": [int(s) for s in seeds], "lam": lam, "clip": clip, "batch_size": batch_size,
                            "init_steps": init_steps, "init_lr": list(init_lr), "fit_steps": fit_steps,
                            "fit_lr": list(fit_lr), "grad_norm": grad_norm, "holdout": holdout, "eval_every": eval_every,
                            "patience": patience, "split_seed": split_seed, "optimizer": "Adam",
                            "schedule": "linear decay from the first to the last learning rate"},
    }
    return MethodResult(method="chg", geometry=geometry, ranking=ranking, effects=-facilitation, cost=cost,
                        baseline=None, extra=extra)


def rank_by_facilitation(g_minus: np.ndarray, g_plus: np.ndarray) -> list[int]:
    """Flat head indices by ``TIE_RULE``; ``g_minus`` and ``g_plus`` are ``[seeds, heads]``.

    >>> rank_by_facilitation(np.array([[0.9, 0.9, 0.2, 0.9]]), np.array([[1.0, 1.0, 1.0, 0.5]]))
    [0, 1, 3, 2]
    """
    g_minus, g_plus = np.atleast_2d(g_minus), np.atleast_2d(g_plus)
    heads = g_minus.shape[1]
    return [int(i) for i in np.lexsort((np.arange(heads), -g_plus.mean(0), -g_minus.mean(0)))]


def mean_pairwise_spearman(per_seed: np.ndarray) -> float | None:
    """Mean Spearman correlation between the rows of ``per_seed`` over all pairs (None: one row)."""
    pairs = list(itertools.combinations(range(len(per_seed)), 2))
    if not pairs:
        return None
    values = []
    for a, b in pairs:
        rho = spearmanr(per_seed[a], per_seed[b]).statistic
        values.append(0.0 if np.isnan(rho) else float(rho))
    return float(np.mean(values))


def _split_stage(stage: _Stage, n_seeds: int) -> tuple[dict, dict]:
    """The joint G+/G- fit's bookkeeping as two stages (rows 0..n-1: G+, n..2n-1: G-)."""
    plus, minus = {}, {}
    for key, values in vars(stage).items():
        if isinstance(values, list):
            plus[key], minus[key] = values[:n_seeds], values[n_seeds:]
    plus["name"], minus["name"] = "lambda>0 (G+)", "lambda<0 (G-)"
    return plus, minus


def _check(*, seeds, lam, clip, batch_size, init_steps, fit_steps, holdout, eval_every, patience, rows_per_pass,
           examples):
    if not examples:
        raise ValueError("chg needs at least one document")
    if len(seeds) < 1 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be one or more distinct integers, got {list(seeds)!r}")
    if not lam > 0:
        raise ValueError(f"lam is |lambda| of the G+/G- fits and must be > 0, got {lam!r}")
    if not clip > 0:
        raise ValueError(f"clip must be > 0, got {clip!r}")
    for name, value in (("batch_size", batch_size), ("init_steps", init_steps), ("fit_steps", fit_steps),
                        ("patience", patience)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(eval_every, int) or eval_every < 0:
        raise ValueError(f"eval_every must be a non-negative integer (0: no early stopping), got {eval_every!r}")
    if rows_per_pass is not None and (not isinstance(rows_per_pass, int) or rows_per_pass < 1):
        raise ValueError(f"rows_per_pass must be a positive integer or None (whole minibatches), got {rows_per_pass!r}")
    if not 0 <= holdout < 1:
        raise ValueError(f"holdout is a fraction of the documents in [0, 1), got {holdout!r}")
