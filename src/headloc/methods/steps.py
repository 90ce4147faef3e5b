"""The steps of a search, one function per rule that runs a part of one, and their typed parameters.

A method's kind (:data:`~headloc.methods.contract.KINDS`) decides which steps run it:

- ``masks``: :func:`design` (rule make_masks), the scoring (rule score_masks); with ``stages=2``
  then :func:`refine` (rule refine_masks) and stage 2's scoring (rule score_stage2_masks);
- ``rounds``: per round, :func:`round_masks` (rule make_greedy_masks), the scoring (rule
  score_greedy_masks), :func:`choose_head` (rule choose_greedy_head);
- ``gradient``: :func:`gradient` (rule gradient_search);
- ``sequential``: :func:`sequential` (rule sequential_search), which scores round after round
  through the ``score`` function it is handed and keeps a record to resume from;
- ``draw``: nothing;

then :func:`recover` (checkpoint recover_heads) for every kind. The scoring is no method's step: the
engine does it (scripts/score_masks.py), or the ``score`` function handed to the driver.

Each step reads its input files, writes its output files and returns what it wrote. Its parameters
come as a frozen dataclass (:class:`DesignParams`, :class:`RefineParams`, :class:`GradientParams`,
:class:`SequentialParams`, :class:`RecoverParams`) that :class:`headloc.workflow.plan.Plan` builds from the config. A rule's
script reads Snakemake's params into the dataclass and makes one call;
:func:`headloc.methods.driver.drive` makes the same calls in the same order in one process, so the
workflow and the driver cannot drift.

>>> import numpy as np
>>> phi = make_masks(20, 8, method="cs_stratified", sparsity=0.1, random_state=0)
>>> phi.shape, phi.sum(axis=1).tolist()
((8, 20), [2, 2, 2, 2, 2, 2, 2, 2])
>>> int(phi.sum(axis=0).max() - phi.sum(axis=0).min())
1
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import atomic_path, oriented, read_json, save_npy, write_json
from headloc.methods.contract import scored_masks
from headloc.methods.registry import get, names


@dataclass(frozen=True)
class DesignParams:
    """Rule make_masks: the design's method, budget (a two-stage method's whole budget: its design is
    stage 1's share), share of heads ablated per mask, and seed."""

    method: str
    n_masks: int
    sparsity: float
    seed: int


@dataclass(frozen=True)
class RefineParams:
    """Rule refine_masks: a two-stage design's whole budget (stage 2 spends what stage 1 left), the
    top k whose stability decides, the Lasso penalty and the seed."""

    n_masks: int
    top_k: int
    alpha: float | str
    seed: int


class _Typed:
    """Step parameters with a method's options: a mapping given (a rule's params, which Snakemake
    passes as plain values) is read into the method's :class:`~headloc.methods.settings.MethodOptions`."""

    def __post_init__(self):
        object.__setattr__(self, "options", get(self.method).options_of(self.options))


@dataclass(frozen=True)
class GradientParams(_Typed):
    """Rule gradient_search: the method, its seed and its options."""

    method: str
    seed: int
    options: object = None


@dataclass(frozen=True)
class SequentialParams(_Typed):
    """Rule sequential_search: the method, its n_masks (masks scored at most, the unablated row
    included), seed, the top k it looks for, the share of heads a mask ablates (Thompson sampling),
    its options and the scored metric's direction."""

    method: str
    n_masks: int
    seed: int
    top_k: int
    sparsity: float
    options: object = None
    higher_is_better: bool = True


@dataclass(frozen=True)
class RecoverParams:
    """Checkpoint recover_heads: the method, the Lasso penalty, the seed, the top k, the scored
    metric's direction (recorded) and, for a nested budget, how many rows of the full design it fits
    (``nested_rows``; None: every row)."""

    method: str
    alpha: float | str
    seed: int
    top_k: int
    higher_is_better: bool = True
    nested_rows: int | None = None


@dataclass(frozen=True)
class RecoverInputs:
    """The files the earlier steps of a search left for :func:`recover`, by kind: a design's masks
    and scores (and stage 2's), greedy's rounds (``chosen.json`` each), a gradient or sequential
    job's result; none for a draw. :meth:`headloc.workflow.plan.Plan.recovery_inputs` names them."""

    masks: str | None = None
    scores: Sequence[str] = ()
    stage2_masks: str | None = None
    stage2_scores: Sequence[str] = ()
    rounds: Sequence[str] = ()
    gradient: str | None = None
    sequential: str | None = None

    @classmethod
    def of(cls, inputs) -> RecoverInputs:
        """From a rule's named inputs (a mapping, or Snakemake's ``input``); others are left out (a
        draw's ``model``: only waited for)."""
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in inputs.items() if name in known})


def make_masks(n_heads: int, n_masks: int | None = None, *, method: str = "cs_stratified",
               sparsity: float | None = None, random_state: int | None = 0) -> np.ndarray:
    """The measurement matrix of a search: ``(M, N)`` int8, 1 = ablated, a pure function of its
    arguments (the same ``random_state``, the same matrix).

    ``n_masks`` and ``sparsity`` are checked for a method that spends a budget (a two-stage
    method's matrix is its stage 1: the screen's share of the budget); one-shot greedy's is the zero
    row and the identity whatever they are.
    """
    spec = get(method)
    if spec.design is None:
        raise ValueError(f"search method {method!r} ({spec.kind}) has no mask design; "
                         f"expected one of {', '.join(names(kind='masks'))}")
    if spec.budgeted:
        if n_masks is None or n_masks < 1:
            raise ValueError(f"n_masks must be a positive integer for {method}, got {n_masks!r}")
        if sparsity is None or not 0 < sparsity < 1:
            raise ValueError(f"sparsity must lie in (0, 1) for {method}, got {sparsity!r}")
    if spec.stages == 2:
        from headloc.search.adaptive import stage_sizes  # sklearn: not at registry import

        n_masks = stage_sizes(n_masks)[0]
    return spec.design(n_heads, n_masks, sparsity, np.random.default_rng(random_state))


def design(params: DesignParams, geometry: HeadGeometry, masks_out, log) -> np.ndarray:
    """Rule make_masks: the design's masks, written to ``masks_out``."""
    masks = make_masks(geometry.total, params.n_masks, method=params.method, sparsity=params.sparsity,
                       random_state=params.seed)
    log.info("%s: %d masks over %d heads (%d x %d), %.1f heads ablated per mask", params.method, len(masks),
             geometry.total, geometry.n_layers, geometry.n_heads, masks.sum(1).mean())
    save_npy(masks_out, masks)
    return masks


def refine(params: RefineParams, geometry: HeadGeometry, masks: str, scores: Sequence[str], *, masks_out,
           plan_out, log) -> np.ndarray:
    """Rule refine_masks: fit stage 1 (``masks`` and their ``scores``), stop if its top k is settled,
    else design stage 2's masks over the uncertain candidates (:func:`headloc.search.adaptive.refine`).
    Writes stage 2's masks (no rows when settled) to ``masks_out`` and the decision to ``plan_out``."""
    from headloc.search.adaptive import refine as refine_design, stage_sizes

    names, k = geometry.names, params.top_k
    stage1, table = scored_masks(masks, scores)
    plan = refine_design(stage1, table["score"].to_numpy(), k=k, n_rows=stage_sizes(params.n_masks)[1],
                         alpha=params.alpha, random_state=params.seed)
    top = np.argsort(-plan.probability, stable=True)[:k]
    log.info("stage 1: %d masks, P(top %d) of its most likely heads: %s; %s", len(stage1), k,
             ", ".join(f"{names[i]} {plan.probability[i]:.2f}" for i in top),
             "settled: no stage 2" if plan.settled else f"stage 2: {len(plan.masks)} masks over "
                                                        f"{len(plan.candidates)} candidates")
    save_npy(masks_out, plan.masks)
    write_json(plan_out, {
        "stage1_masks": int(len(stage1)), "stage2_masks": int(len(plan.masks)), "settled": plan.settled,
        "alpha": plan.alpha, "candidates": [names[i] for i in plan.candidates],
        "top_k_probability": {name: float(q) for name, q in zip(names, plan.probability)},
    })
    return plan.masks


def _heads(path) -> list[str]:
    """The heads a universal-heads file lists (rule universal_heads; none: no file)."""
    return read_json(path)["heads"] if path else []


def _chosen(path) -> dict | None:
    """The round before's record (``chosen.json``); None before round 1."""
    return read_json(path) if path else None


def round_masks(geometry: HeadGeometry, previous, universal, masks_out, log) -> np.ndarray:
    """Rule make_greedy_masks: the masks of the round after ``previous`` (the round before's
    ``chosen.json``; none for round 1): the heads chosen so far plus each remaining head in turn,
    leaving out the heads ``universal`` lists (after round 1, which scores every head alone)."""
    from headloc.search.greedy import round_masks as masks_after

    chosen = (_chosen(previous) or {"chosen": []})["chosen"]
    excluded = _heads(universal) if chosen else []
    masks = masks_after(geometry.total, [geometry.names.index(h) for h in chosen],
                        exclude=[geometry.names.index(h) for h in excluded])
    log.info("round %d: %d masks, heads kept ablated: %s; universal heads left out: %s", len(chosen) + 1,
             len(masks), ", ".join(chosen) or "none", ", ".join(excluded) or "none")
    save_npy(masks_out, masks)
    return masks


def choose_head(round_: int, geometry: HeadGeometry, masks: str, scores: Sequence[str], previous, universal,
                chosen_out, log) -> dict:
    """Rule choose_greedy_head: greedy round ``round_``'s record (:func:`headloc.methods.greedy.choose_round`)
    from its masks and scores, the round before's record (``previous``) and the universal heads it
    never chooses; written to ``chosen_out``."""
    from headloc.methods.greedy import choose_round

    phi, table = scored_masks(masks, scores)
    record = choose_round(_chosen(previous), phi, table["score"].to_numpy(), geometry.names, _heads(universal))
    if record["round"] != round_:
        raise ValueError(f"round {round_} follows {len(record['chosen']) - 1} chosen heads")
    log.info("round %s keeps %s (score %.4f)", record["round"], record["chosen"][-1], record["score"])
    write_json(chosen_out, record)
    return record


def gradient(params: GradientParams, model, examples, batch_size: int, result_out, log) -> dict:
    """Rule gradient_search: run the gradient method on the gold continuations ``examples``
    (:class:`headloc.engine.supervision.Example`), ``batch_size`` rows per forward pass (memory only:
    the result does not depend on it); write its part of recovery.json (method, documents and
    :func:`headloc.engine.supervision.recovery_fields`) to ``result_out``."""
    from headloc.engine.supervision import recovery_fields

    started = time.perf_counter()
    result = get(params.method).run(model, examples, params.options, params.seed, batch_size)
    ranked = recovery_fields(result)
    log.info("%s: %d fwd+bwd and %d forward passes in %.1f s, about %d masked evaluations; top heads %s",
             params.method, result.cost.fwd_bwd_passes, result.cost.forward_passes, time.perf_counter() - started,
             ranked["n_evals"], ", ".join(ranked["ranking"][:5]))
    found = {"method": params.method, "n_docs": len(examples), **ranked}
    write_json(result_out, found)
    return found


def sequential(params: SequentialParams, geometry: HeadGeometry, score, record_path, result_out, log, *,
               key: str = "") -> dict:
    """Rule sequential_search: the method's sequential search, round by round, each round's masks
    scored in one call of ``score(masks) -> scores`` (raw, in the metric's direction, so that the
    round shares forward passes), every round appended to the record at ``record_path`` before the
    next is proposed. A record left by a killed run of the same search (same parameters and
    ``key``: what the scores depend on beyond them, e.g. the model's and documents' files) is
    resumed: no mask it holds is scored again. Writes the method's part of recovery.json to
    ``result_out``."""
    search = get(params.method).search(geometry.total, params)
    identity = json.dumps({"params": asdict(params), "key": key}, sort_keys=True, default=str)
    masks, raw = read_record(record_path, identity, geometry.total, log)
    live = search.resume(masks, oriented(raw, params.higher_is_better))  # one replay, then round by round
    scored = 0
    while live.pending is not None:
        pending = live.pending
        new = np.asarray(score(pending), dtype=float).reshape(-1)
        if len(new) != len(pending):
            raise ValueError(f"score returned {len(new)} scores for {len(pending)} masks")
        masks, raw = np.vstack([masks, pending]), np.concatenate([raw, new])
        write_record(record_path, masks, raw, identity)
        scored += len(pending)
        log.info("%s: scored %d masks this round, %d in the record (budget %d)", params.method, len(pending),
                 len(masks), params.n_masks)
        live.advance(oriented(new, params.higher_is_better))
    found = live.found
    log.info("%s: done after %d masks (%d scored in this run); top heads %s", params.method, found.n_evals, scored,
             ", ".join(geometry.names[i] for i in found.ranking[: params.top_k]))
    warnings = found.warnings(geometry.names, params.top_k, params.method)
    for warning in warnings:
        log.warning(warning)
    result = {"method": params.method, **sequential_fields(found, geometry.names), "warnings": warnings}
    write_json(result_out, result)
    return result


def record_key(*, task_digest: str, location: str, model: Mapping, task: Mapping, inputs) -> str:
    """What a sequential search's record depends on beyond the step's parameters (``key`` of
    :func:`sequential`): the task's digest, the model's location and settings, the task's spec and
    the modification time of each input file (model files, documents), so that a record left by
    a run on another model, other documents or another task is not resumed."""
    stamps = {str(path): os.stat(path).st_mtime_ns for path in inputs}
    return json.dumps({"task_digest": task_digest, "location": location, "model": model, "task": task,
                       "inputs": stamps}, sort_keys=True, default=str)


def sequential_fields(found, names: Sequence[str]) -> dict:
    """recovery.json's ranking fields of a sequential search's
    :class:`~headloc.search.sequential.Recovery`: ranked head names, each head's value and what it
    is (``labels``), the evaluations (the unablated row included) and the unablated score
    (``intercept``); ``details`` are the search's own, heads named as everywhere else; ``confirmed``
    the heads it ablated alone and accepted (None: it confirms none)."""
    confirmed = None if found.confirmed is None else [names[i] for i in found.confirmed]
    return {
        "n_evals": int(found.n_evals), "alpha": None, "r2": None, "intercept": float(found.baseline),
        "ranking": [names[i] for i in found.ranking],
        "coef": {name: float(value) for name, value in zip(names, found.coef)},
        "labels": dict(zip(names, found.labels)),
        "details": found.named_details(names),
        "confirmed": confirmed,
    }


def read_record(path, identity: str, n_heads: int, log) -> tuple[np.ndarray, np.ndarray]:
    """A sequential search's record (masks, raw scores) at ``path``; empty when there is none, or
    when it is another search's (its ``identity`` differs: the search is started afresh)."""
    empty = np.zeros((0, n_heads), dtype=np.int8), np.zeros(0)
    if not Path(path).exists():
        return empty
    with np.load(path) as record:
        if str(record["identity"]) != identity:
            log.info("%s was left by another search or inputs: starting afresh", path)
            return empty
        masks, raw = record["masks"], record["scores"]
    log.info("resuming from %s: %d masks already scored", path, len(masks))
    return masks, raw


def write_record(path, masks: np.ndarray, raw: np.ndarray, identity: str) -> None:
    """The whole record, atomically (:func:`headloc.io.atomic_path`): a kill at any instant leaves
    the previous record or this one, never half of one."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, masks=masks.astype(np.int8), scores=raw.astype(float), identity=np.array(identity))


def recover(params: RecoverParams, inputs: RecoverInputs, geometry: HeadGeometry, log) -> dict:
    """Checkpoint recover_heads: the method's ``recover`` ranks the heads from ``inputs``; returned
    with the method, the model's geometry and the top k: recovery.json less the search's identity
    (model, task, search), which the caller adds. Every record has ``confirmed`` (the heads its
    search ablated alone and accepted; None for a search that confirms none) and ``warnings`` (what
    a reader of its top heads must know, in words; a sequential search's, else none)."""
    method = get(params.method)
    found = method.recover(inputs, geometry.names, params, log)
    top = found["ranking"][: params.top_k]
    log.info("%s: top heads %s after %d evaluations", params.method, ", ".join(top), found["n_evals"])
    for warning in found.get("warnings", []):
        log.warning(warning)
    return {
        "method": params.method,
        "n_layers": geometry.n_layers,
        "n_heads": geometry.n_heads,
        "confirmed": None,
        "warnings": [],
        **found,
        "top_heads": top,
        # a scored method's coef and intercept are changes of the score made higher-is-better
        # (negated for a lower-is-better metric: headloc.io.read_scores); a gradient method's are
        # changes of the gold continuations' log-likelihood, higher-is-better by construction
        "higher_is_better": params.higher_is_better if method.scored else True,
    }
