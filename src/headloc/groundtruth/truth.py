"""The measured truth of a planted model: what ablating its heads does to each task, written to truth.json.

Nothing here is taken from the design: every number is a measurement on the saved checkpoint.
For each task the scores are lm-eval's ``multiple_choice`` accuracy (the choice with the highest
log-likelihood; every choice is one token, so that is the choice whose token the last position
gives the highest logit) and the mean log-probability of the gold answer among the choices, with:

- every head ablated alone (``single``),
- the task's planted heads ablated together (``planted_set``),
- the redundant pair's heads alone and together (``pair``),
- each interaction's heads alone and together, with a certificate of its own (``interactions``:
  :func:`headloc.groundtruth.certificates.interaction_certificate`),
- each planted head's designed share of the task's documents (``expected_share``),

and what disagrees with the design, never hidden: ``planted_but_weak`` (a planted head meant to
matter alone whose ablation changes the accuracy by less than ``threshold``) and
``unplanted_but_strong`` (a head outside the task's planted set whose ablation lowers it by
``threshold`` or more). The general text's loss with every head ablated alone shows that the
heads outside the tasks do work. The clean and the planted-set scores are also taken through
lm-eval itself (:class:`headloc.engine.evaluation.MaskEvaluator` on the model's task folder) and must agree.

A design with ``stratify: n`` measures the heads on the first n documents of each task, the ones
the searches score, and each task gets a ``certificate``
(:func:`headloc.groundtruth.certificates.certificate`) on the searches' own score, the gold's mean
log-probability among the choices. The scoring is :mod:`headloc.groundtruth.mask_scores`'s, the
Markdown summary (truth.md) :mod:`headloc.groundtruth.truth_table`'s.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.certificates import certificate, interaction_certificate
from headloc.groundtruth.design import UNIVERSAL, Design
from headloc.groundtruth.general_text import eval_text
from headloc.groundtruth.mask_scores import (encode, lm_eval_scores, load_planted, read_documents, score_masks,
                                             text_losses)
from headloc.heads import format_head

TEXT_HEADS = 256  # beyond this many heads, the text loss is measured on the planted ones and a seeded sample


def planted_sets(design: Design, placement: dict) -> dict[str, dict]:
    """Per task: its planted heads, each head's designed share of the documents, the redundant pair, its
    interactions (kind, role, first and second head) and the heads meant to do nothing alone
    (``quiet``: a backup, a redundant interaction's two)."""
    out = {}
    for task, kinds in design.tasks.items():
        share: dict[str, float] = {h: 1.0 for h in placement[UNIVERSAL]}
        pair: list[str] = []
        interactions, quiet = [], []
        for kind in kinds:
            for head in placement[kind.role]:
                share[head] = share.get(head, 0.0) + kind.weight
            if kind.role in design.redundant:
                pair = list(placement[kind.role])
            if kind.role in design.interactions:
                heads, how = list(placement[kind.role]), design.interactions[kind.role].kind
                interactions.append({"kind": how, "role": kind.role, "heads": heads})
                quiet += {"backup": heads[1:], "redundant": heads, "synergy": []}[how]
        roles = {h: r for r, hs in placement.items() for h in hs}
        out[task] = {"heads": list(share), "roles": {h: roles[h] for h in share},
                     "expected_share": {h: round(s, 4) for s, h in zip(share.values(), share)}, "pair": pair,
                     "interactions": interactions, "quiet": quiet}
    return out


def measure(folder, *, lm_eval_check: bool = True, log=print) -> dict:
    """The truth of the planted model in ``folder`` (see the module docstring)."""
    start = time.perf_counter()
    model, tokenizer, planted = load_planted(folder)
    design = Design.from_dict(planted["recipe"]["design"])
    placement = planted["placement"]
    threshold = design.threshold
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    names = [format_head(*divmod(i, n_heads)) for i in range(n_layers * n_heads)]
    sets = planted_sets(design, placement)
    result = {"model": planted["name"], "digest": planted["digest"], "layers": n_layers, "heads_per_layer": n_heads,
              "n_heads": len(names), "metric": "acc", "threshold": threshold,
              "threshold_means": f"a head matters for a task when ablating it alone changes the task's accuracy "
                                 f"by {threshold} or more ({threshold * design.docs_per_task:g} of "
                                 f"{design.docs_per_task} documents)",
              "placement": placement, "tasks": {}}
    for task in design.tasks:
        entry = measure_task(model, tokenizer, folder, design, task, sets[task], names, lm_eval_check)
        result["tasks"][task] = entry
        log(f"{task}: baseline {entry['baseline']['acc']:.3f}, planted set {entry['planted_set']['acc']:.3f}, "
            f"weak {entry['planted_but_weak']}, unplanted strong {entry['unplanted_but_strong']}")
    result["text"] = text_work(model, design, placement, names, planted.get("training", {}).get("text_entropy"))
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def measure_task(model, tokenizer, folder, design: Design, task: str, info: dict, names: list[str],
                 lm_eval_check: bool) -> dict:
    """One task's entry of truth.json: every head alone, the planted set, the pair and the interactions."""
    every_doc = encode(tokenizer, read_documents(folder, task))
    searched = design.stratify or len(every_doc[2])  # the documents the searches score
    data = tuple(tensor[:searched] for tensor in every_doc)

    def mask_of(heads):
        mask = np.zeros(len(names), dtype=np.int8)
        mask[[names.index(h) for h in heads]] = 1
        return mask

    planted_heads = info["heads"]
    special = {"none": mask_of([]), "planted_set": mask_of(planted_heads)}
    if info["pair"]:
        special.update({f"pair_only_{h}": mask_of([h]) for h in info["pair"]})
        special["pair_both"] = mask_of(info["pair"])
    special.update({f"both_{i['role']}": mask_of(i["heads"]) for i in info["interactions"]})
    acc, logp = score_masks(model, *data, np.vstack([*special.values(), np.eye(len(names), dtype=np.int8)]))
    row = {name: i for i, name in enumerate(special)}
    k, base_acc, base_logp = len(special), float(acc[0]), float(logp[0])
    single = {h: {"acc": round(float(acc[k + i]), 4), "delta": round(float(acc[k + i]) - base_acc, 4),
                  "logprob_delta": round(float(logp[k + i]) - base_logp, 4)} for i, h in enumerate(names)}
    alone = [h for h in planted_heads if h not in info["pair"] and h not in info["quiet"]]
    unplanted = [h for h in names if h not in planted_heads]
    strongest = min(unplanted, key=lambda h: (single[h]["delta"], single[h]["logprob_delta"]))
    entry = {
        "lm_eval_task": T.lm_eval_name(task),
        "documents": searched,
        "documents_in_task": len(every_doc[2]),
        "baseline": {"acc": round(base_acc, 4), "logprob": round(base_logp, 4)},
        "planted": {h: {"role": info["roles"][h], "expected_share": info["expected_share"][h], **single[h]}
                    for h in planted_heads},
        "planted_set": {"heads": planted_heads, "acc": round(float(acc[1]), 4),
                        "delta": round(float(acc[1]) - base_acc, 4)},
        "planted_but_weak": [h for h in alone if single[h]["delta"] > -design.threshold],
        "unplanted_but_strong": [h for h in unplanted if single[h]["delta"] <= -design.threshold],
        "strongest_unplanted": {"head": strongest, **single[strongest]},
        "single": single,
    }
    pair_both = None
    if info["pair"]:
        pair_both = float(logp[row["pair_both"]]) - base_logp
        entry["pair"] = pair_entry(info["pair"], {h: float(acc[row[f"pair_only_{h}"]]) - base_acc
                                                  for h in info["pair"]},
                                   float(acc[row["pair_both"]]) - base_acc, pair_both, design.threshold)
    if design.stratify:
        deltas = {h: float(logp[k + i]) - base_logp for i, h in enumerate(names)}
        entry["certificate"] = certificate(deltas, planted_heads, info["pair"], pair_both, quiet=tuple(info["quiet"]))
        if info["interactions"]:
            entry["interactions"] = [{"role": i["role"], **interaction_certificate(
                i["kind"], i["heads"], deltas, float(logp[row[f"both_{i['role']}"]]) - base_logp, planted_heads)}
                for i in info["interactions"]]
    if lm_eval_check:
        entry["lm_eval"] = lm_eval_agreement(model, tokenizer, folder, task, every_doc, searched, special,
                                             {"none": base_acc, "planted_set": float(acc[1])})
    return entry


def pair_entry(heads: list[str], alone: dict[str, float], both: float, both_logprob: float, threshold: float) -> dict:
    """The redundant pair's accuracy changes alone and together, and whether it is redundant in accuracy."""
    alone = {h: round(d, 4) for h, d in alone.items()}
    both = round(both, 4)
    return {"heads": heads, "alone_delta": alone, "both_delta": both, "both_logprob_delta": round(both_logprob, 4),
            "redundant": all(d > -threshold for d in alone.values()) and both <= -threshold}


def lm_eval_agreement(model, tokenizer, folder, task: str, every_doc, searched: int, special: dict,
                      direct: dict[str, float]) -> dict[str, float]:
    """The clean and planted-set accuracies through lm-eval's evaluator; an error where they differ from
    the direct scoring (on every document: lm-eval scores them all)."""
    via = lm_eval_scores(model, tokenizer, folder, T.lm_eval_name(task),
                         {"none": special["none"], "planted_set": special["planted_set"]})
    if searched < len(every_doc[2]):
        direct = dict(zip(direct, score_masks(model, *every_doc, np.vstack(
            [special["none"], special["planted_set"]]))[0]))
    if any(abs(via[name] - direct[name]) > 1e-9 for name in via):
        raise ValueError(f"task {task}: lm-eval's accuracy {via} differs from the direct scoring {direct}")
    return {name: round(v, 4) for name, v in via.items()}


def text_work(model, design: Design, placement: dict, names: list[str], entropy: float | None) -> dict:
    """The general text's loss with every head ablated alone: do the unplanted heads work? Beyond
    TEXT_HEADS heads, the planted heads and a seeded sample of the others (``heads_measured``)."""
    planted = {h for hs in placement.values() for h in hs}
    measured = list(names)
    if len(names) > TEXT_HEADS:
        others = [h for h in names if h not in planted]
        sample = np.random.default_rng([design.seed, 7]).choice(len(others), TEXT_HEADS, replace=False)
        measured = sorted(planted | {others[i] for i in sample}, key=names.index)
    masks = np.zeros((1 + len(measured), len(names)), dtype=np.int8)
    for row, head in enumerate(measured, start=1):
        masks[row, names.index(head)] = 1
    rows = torch.from_numpy(eval_text(design, rows=64 if len(names) <= TEXT_HEADS else 32))
    losses = text_losses(model, rows, masks)
    deltas = {head: round(float(losses[1 + i] - losses[0]), 4) for i, head in enumerate(measured)}
    every = [h for h in measured if h not in planted]
    return {
        "heads_measured": len(measured), "text_rows": len(rows),
        "baseline_loss": round(float(losses[0]), 4),
        "true_entropy": entropy,
        "single_delta": deltas,
        "unplanted_median_delta": round(float(np.median([deltas[h] for h in every])), 4),
        "unplanted_over_0.01": sum(deltas[h] >= 0.01 for h in every),
        "unplanted_count": len(every),
    }

