"""The measured truth of a planted model: what ablating its heads does to each task, written to truth.json.

Nothing here is taken from the design: every number is a measurement on the saved checkpoint.
For each task the scores are lm-eval's ``multiple_choice`` accuracy (the choice with the highest
log-likelihood; every choice is one token, so that is the choice whose token the last position
gives the highest logit) and the mean log-probability of the gold answer among the choices, with:

- every head ablated alone (``single``),
- the task's planted heads ablated together (``planted_set``),
- the redundant pair's heads alone and together (``pair``),
- each interaction's heads alone and together, with a certificate of its own (``interactions``:
  :func:`interaction_certificate`),
- each planted head's designed share of the task's documents (``expected_share``),

and what disagrees with the design, never hidden: ``planted_but_weak`` (a planted head meant to
matter alone whose ablation changes the accuracy by less than ``threshold``) and
``unplanted_but_strong`` (a head outside the task's planted set whose ablation lowers it by
``threshold`` or more). The general text's loss with every head ablated alone shows that the
heads outside the tasks do work. The clean and the planted-set scores are also taken through
lm-eval itself (:class:`headloc.engine.evaluation.MaskEvaluator` on the model's task folder) and must agree.

A design with ``stratify: n`` measures the heads on the first n documents of each task, the ones
the searches score, and each task gets a ``certificate`` (:func:`certificate`) on the searches'
own score, the gold's mean log-probability among the choices.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from headloc.model.ablation import ablate_heads
from headloc.groundtruth import tasks as T
from headloc.groundtruth.recipe import UNIVERSAL, Design
from headloc.heads import format_head

MAX_ROWS = 2048  # rows (document x mask) per forward pass
TEXT_HEADS = 256  # beyond this many heads, the text loss is measured on the planted ones and a seeded sample
# A task's truth is certified when its weakest planted effect stands this far above the unplanted ones.
CERTIFY_LARGEST, CERTIFY_SPREAD = 5.0, 20.0


def unplanted_tail(logprob_delta: dict[str, float], planted: list[str]) -> dict:
    """What the heads outside the planted set do to a task alone: tau (the standard deviation of their
    single effects) and the largest of them (signed) with its head."""
    unplanted = {h: d for h, d in logprob_delta.items() if h not in planted}
    largest = max(unplanted, key=lambda h: abs(unplanted[h]))
    return {"tau": float(np.std(list(unplanted.values()))), "largest": unplanted[largest], "largest_head": largest}


def clears(effect: float, tail: dict) -> dict:
    """Whether a planted effect (a drop of the gold log-probability, positive) stands clear of the
    unplanted tail: at least CERTIFY_LARGEST x |the largest unplanted effect| and CERTIFY_SPREAD x tau."""
    over_largest = effect / abs(tail["largest"]) if tail["largest"] else None
    over_tau = effect / tail["tau"] if tail["tau"] else None
    holds = effect > 0 and (over_largest is None or over_largest >= CERTIFY_LARGEST) and (
        over_tau is None or over_tau >= CERTIFY_SPREAD)
    return {"over_largest": None if over_largest is None else round(over_largest, 2),
            "over_tau": None if over_tau is None else round(over_tau, 2), "holds": bool(holds)}


def certificate(logprob_delta: dict[str, float], planted: list[str], pair: list[str], pair_both: float | None,
                quiet: tuple[str, ...] = ()) -> dict:
    """Whether a task's planted heads stand clear of the rest on the searches' score.

    beta_min: the weakest planted effect (a head alone; a redundant pair together); tau: the standard
    deviation of the unplanted heads' single effects; the task passes when beta_min is at least
    CERTIFY_LARGEST times the largest unplanted effect and CERTIFY_SPREAD times tau. ``quiet`` heads
    are planted but meant to do nothing alone (a backup, a redundant interaction's heads): they stay
    out of beta_min, and their interactions are certified on their own (:func:`interaction_certificate`)."""
    effects = {h: -logprob_delta[h] for h in planted if h not in pair and h not in quiet}
    if pair:
        effects["+".join(pair)] = -pair_both
    weakest = min(effects, key=effects.get)
    beta_min = effects[weakest]
    tail = unplanted_tail(logprob_delta, planted)
    ratios = clears(beta_min, tail)
    return {"beta_min": round(beta_min, 5), "weakest": weakest, "tau": round(tail["tau"], 6),
            "largest_unplanted": round(tail["largest"], 5), "largest_unplanted_head": tail["largest_head"],
            "beta_over_largest": ratios["over_largest"], "beta_over_tau": ratios["over_tau"],
            "passes": ratios["holds"],
            "rule": f"beta_min >= {CERTIFY_LARGEST:g} x |largest unplanted| and beta_min >= {CERTIFY_SPREAD:g} x tau"}


CLEARS = f">= {CERTIFY_LARGEST:g} x |largest unplanted| and >= {CERTIFY_SPREAD:g} x tau"
INTERACTION_RULES = {
    "backup": f"primary alone {CLEARS}; |backup alone| < tau; backup once the primary is ablated (both - primary "
              f"alone) {CLEARS}",
    "redundant": f"|each alone| < tau; both {CLEARS}",
    "synergy": f"each alone {CLEARS}",
}


def interaction_certificate(kind: str, heads: list[str], logprob_delta: dict[str, float], both: float,
                            planted: list[str]) -> dict:
    """Whether an interaction holds on the searches' score, by its kind's rule (INTERACTION_RULES).

    ``heads``: its first and second head; ``logprob_delta``: every head's single effect on the task's
    gold log-probability (the tail is the task's unplanted heads); ``both``: the effect with both
    ablated. Effects in ``checks`` are drops (positive: the score falls)."""
    tail = unplanted_tail(logprob_delta, planted)
    first, second = heads
    alone = {h: logprob_delta[h] for h in heads}

    def clear(what, drop):
        return {"what": what, "effect": round(drop, 5) + 0.0, **clears(drop, tail)}  # + 0.0: no -0.0

    def quiet(what, drop):
        return {"what": what, "effect": round(drop, 5) + 0.0, "holds": bool(abs(drop) < tail["tau"])}

    if kind == "backup":
        checks = [clear("primary alone", -alone[first]), quiet("backup alone", -alone[second]),
                  clear("backup once the primary is ablated", alone[first] - both)]
    elif kind == "redundant":
        checks = [quiet(f"{h} alone", -alone[h]) for h in heads] + [clear("both", -both)]
    elif kind == "synergy":
        checks = [clear(f"{h} alone", -alone[h]) for h in heads]
    else:
        raise ValueError(f"interaction kind {kind!r} is not one of {', '.join(INTERACTION_RULES)}")
    return {"kind": kind, "heads": list(heads), "alone": {h: round(d, 5) + 0.0 for h, d in alone.items()},
            "both": round(both, 5), "tau": round(tail["tau"], 6), "largest_unplanted": round(tail["largest"], 5),
            "checks": checks, "passes": all(c["holds"] for c in checks), "rule": INTERACTION_RULES[kind]}


def load_planted(folder):
    """(model, tokenizer, planted.json) of a built planted model folder, loaded as any checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    planted = json.loads((folder / "planted.json").read_text(encoding="utf-8"))
    return model, tokenizer, planted


def read_documents(folder, task: str) -> list[dict]:
    with open(Path(folder) / "tasks" / f"{task}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def encode(tokenizer, docs: list[dict]):
    """Documents as (contexts [n, T], choice ids [n, C], labels [n]) through the saved tokenizer."""
    contexts = [tokenizer(d["text"], add_special_tokens=False)["input_ids"] for d in docs]
    if len({len(c) for c in contexts}) != 1:
        raise ValueError("planted documents must all have the same number of tokens")
    choices = []
    for d in docs:
        ids = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in d["choices"]]
        if any(len(i) != 1 for i in ids):
            raise ValueError(f"every choice must be one token: {d['choices']}")
        choices.append([i[0] for i in ids])
    return torch.tensor(contexts), torch.tensor(choices), torch.tensor([d["label"] for d in docs])


def score_masks(model, contexts, choices, labels, masks) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and mean gold log-probability among the choices, for each mask (1 = ablated).

    ``masks`` is [M, layers * heads]; several masks share one forward pass (a batched gate), on
    the model's device.
    """
    masks = np.atleast_2d(np.asarray(masks))
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    device = model.device
    contexts, choices, labels = contexts.to(device), choices.to(device), labels.to(device)
    n = len(labels)
    per_pass = max(1, MAX_ROWS // n)
    accs, logps = [], []
    with torch.no_grad():
        for start in range(0, len(masks), per_pass):
            group = torch.as_tensor(masks[start:start + per_pass], dtype=torch.float32)
            gate = (1.0 - group).reshape(-1, n_layers, n_heads).repeat_interleave(n, dim=0)
            with ablate_heads(model, gate):
                logits = model(contexts.repeat(len(group), 1)).logits[:, -1]
            chosen = logits.gather(1, choices.repeat(len(group), 1)).double()
            logp = torch.log_softmax(chosen, dim=-1).reshape(len(group), n, -1)
            correct = (logp.argmax(-1) == labels[None]).double()
            accs.append(correct.mean(1).cpu().numpy())
            logps.append(logp.gather(2, labels[None, :, None].expand(len(group), n, 1))[..., 0].mean(1).cpu().numpy())
    return np.concatenate(accs), np.concatenate(logps)


def text_losses(model, rows: torch.Tensor, masks) -> np.ndarray:
    """Mean next-token loss (nats) of the general text for each mask (1 = ablated), on the model's device."""
    masks = np.atleast_2d(np.asarray(masks))
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    per_pass = max(1, MAX_ROWS // (4 * len(rows)))
    rows = rows.to(model.device)
    out = []
    with torch.no_grad():
        for start in range(0, len(masks), per_pass):
            group = torch.as_tensor(masks[start:start + per_pass], dtype=torch.float32)
            gate = (1.0 - group).reshape(-1, n_layers, n_heads).repeat_interleave(len(rows), dim=0)
            batch = rows.repeat(len(group), 1)
            with ablate_heads(model, gate):
                logits = model(batch[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")
            out.append(loss.mean(1).reshape(len(group), len(rows)).mean(1).cpu().numpy())
    return np.concatenate(out)


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


def lm_eval_scores(model, tokenizer, folder, lm_eval_task: str, masks: dict[str, np.ndarray]) -> dict[str, float]:
    """The same masks scored through lm-eval (headloc's MaskEvaluator) on the model's task folder."""
    from headloc.engine.evaluation import MaskEvaluator
    from headloc.engine.lm_eval_tasks import TaskSpec

    evaluator = MaskEvaluator(model, tokenizer, TaskSpec(lm_eval_task, metric="acc"), batch_size=64,
                              include_path=[str(Path(folder) / "tasks")])
    return {name: evaluator.evaluate_mask(mask).score for name, mask in masks.items()}


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
    rows = torch.from_numpy(T.eval_text(design, rows=64 if len(names) <= TEXT_HEADS else 32))
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


def summary_table(truth: dict) -> str:
    """Markdown: per task, the planted heads' single-ablation accuracy changes and the strongest other head."""
    lines = ["| task | baseline | planted head (role, share): delta acc | planted set | pair alone / both | "
             "strongest unplanted | weak planted | strong unplanted |", "|---|---|---|---|---|---|---|---|"]
    for task, e in truth["tasks"].items():
        heads = ", ".join(f"{h} ({p['role']}, {p['expected_share']:g}): {p['delta']:+.3f}" for h, p in e["planted"].items())
        pair = "-"
        if "pair" in e:
            pair = " ".join(f"{d:+.3f}" for d in e["pair"]["alone_delta"].values()) + f" / {e['pair']['both_delta']:+.3f}"
        s = e["strongest_unplanted"]
        lines.append(f"| {task} | {e['baseline']['acc']:.3f} | {heads} | {e['planted_set']['delta']:+.3f} | {pair} | "
                     f"{s['head']}: {s['delta']:+.3f} | {', '.join(e['planted_but_weak']) or '-'} | "
                     f"{', '.join(e['unplanted_but_strong']) or '-'} |")
    certified = {task: e["certificate"] for task, e in truth["tasks"].items() if "certificate" in e}
    if certified:
        lines += ["", f"Certificate (gold log-probability, first {next(iter(truth['tasks'].values()))['documents']} "
                  f"documents; {next(iter(certified.values()))['rule']}):", "",
                  "| task | beta_min (weakest) | largest unplanted | tau | beta/largest | beta/tau | passes |",
                  "|---|---|---|---|---|---|---|"]
        for task, c in certified.items():
            lines.append(f"| {task} | {c['beta_min']:.4f} ({c['weakest']}) | {c['largest_unplanted']:+.5f} "
                         f"({c['largest_unplanted_head']}) | {c['tau']:.6f} | {c['beta_over_largest']} | "
                         f"{c['beta_over_tau']} | {'yes' if c['passes'] else '**no**'} |")
    return "\n".join(lines + interactions_table(truth))


def interactions_table(truth: dict) -> list[str]:
    """Markdown lines: each interaction's effects (gold log-probability deltas) and its certificate's checks."""
    found = [(task, i) for task, e in truth["tasks"].items() for i in e.get("interactions", [])]
    if not found:
        return []
    lines = ["", "Interactions (gold log-probability changes; checks are drops, with their ratios to the largest "
             "unplanted effect and to tau):", "",
             "| task | kind | heads (first, second) | alone | both | tau | largest unplanted | checks | passes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for task, i in found:
        alone = ", ".join(f"{d:+.5f}" for d in i["alone"].values())
        checks = "; ".join(f"{c['what']} {c['effect']:.5f} " + (f"({c['over_largest']} x, {c['over_tau']} x tau)"
                                                                if "over_tau" in c else "(< tau)" if c["holds"] else
                                                                "(not < tau)") for c in i["checks"])
        lines.append(f"| {task} | {i['kind']} | {', '.join(i['heads'])} | {alone} | {i['both']:+.5f} | "
                     f"{i['tau']:.6f} | {i['largest_unplanted']:+.5f} | {checks} | {'yes' if i['passes'] else '**no**'} |")
    return lines
