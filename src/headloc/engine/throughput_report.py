"""The variants of a timed throughput run (:mod:`headloc.engine.throughput`) compared and tabulated:
whether they agree (:func:`differences`, :func:`same`), their per-mask figures (:func:`summarise`)
and the table the benchmark prints (:func:`report_lines`).

Apart from the timing itself: plain arithmetic and text over the figures a run returns, with
neither a model nor lm-eval.
"""

from __future__ import annotations

import numpy as np


# Log-likelihoods of the same text in differently shaped batches differ by float32 rounding
# (about 1e-4 on values near -10): lm-eval's own batch 16 vs batch 1 already does.
LOGLIK_TOLERANCE = 1e-3


def differences(reference: list[dict], other: list[dict]) -> dict:
    """Score differences and response differences between two runs over the same masks: the largest
    score difference, the largest log-likelihood difference (a log-likelihood response is a list of
    (loglik, is_greedy) pairs), and how many generated texts differ."""
    score_diff = max(abs(r["score"] - o["score"]) for r, o in zip(reference, other))
    ll_diff, text_diff = 0.0, 0
    for r, o in zip(reference, other):
        for rs, os_ in zip(r["samples"], o["samples"]):
            a, b = rs["response"], os_["response"]
            if isinstance(a, list):
                ll_diff = max(ll_diff, float(np.max(np.abs(np.array([c[0] for c in a]) - np.array([c[0] for c in b])))))
            elif a != b:
                text_diff += 1
    return {"max_score_diff": score_diff, "max_loglik_diff": ll_diff, "different_texts": text_diff}


def same(diff: dict) -> bool:
    """Whether :func:`differences` found the same results: scores and texts exactly, log-likelihoods
    within :data:`LOGLIK_TOLERANCE`."""
    return diff["max_score_diff"] == 0 and diff["different_texts"] == 0 and diff["max_loglik_diff"] < LOGLIK_TOLERANCE


def summarise(timed: dict, n_masks: int, ceiling: dict) -> bool:
    """Add to every variant its seconds per mask, tokens/s, share of the ceiling and time over (a)'s,
    and to every variant but the reference ((a), else (b)) its :func:`differences` from it
    (``vs_a`` or ``vs_b``); return whether every variant gave the same results."""
    all_same = True
    for variants in timed.values():
        base = variants.get("a")
        reference = "a" if base else "b"
        for key, v in variants.items():
            v["s_per_mask"] = v["seconds"] / n_masks
            v["tokens_per_s"] = v["tokens"] / v["seconds"]
            v["of_ceiling"] = v["tokens_per_s"] / ceiling["tokens_per_s"]
            v["ratio_to_a"] = v["seconds"] / base["seconds"] if base else float("nan")
            if key != reference:
                v["vs_" + reference] = differences(variants[reference]["results"], v["results"])
                all_same &= same(v["vs_" + reference])
    return all_same


def report_lines(timed: dict, all_same: bool) -> list[str]:
    """The table of a :func:`summarise` d run, the ratios to (a) and the agreement of the results."""
    header = (f"{'task':<9} {'variant':<52} {'s/mask':>7} {'/(a)':>6} {'speed-up':>8} "
              f"{'tokens':>8} {'tok/s':>6} {'ceiling':>7} {'setup s':>7}")
    lines = ["", header, "-" * len(header)]
    for task, variants in timed.items():
        lines += [f"{task:<9} {v['label']:<52} {v['s_per_mask']:>7.2f} {v['ratio_to_a']:>6.3f} "
                  f"{1 / v['ratio_to_a']:>7.1f}x {v['tokens']:>8} {v['tokens_per_s']:>6.0f} "
                  f"{v['of_ceiling']:>6.0%} {v['setup']:>7.1f}" for v in variants.values()]
    lines += ["", "ratios (time per mask, lower is faster):"]
    lines += [f"  {task}: (b)/(a) = {v['b']['ratio_to_a']:.3f}, (c)/(a) = {v['c']['ratio_to_a']:.3f}"
              f"  ->  (c) is {1 / v['c']['ratio_to_a']:.1f}x faster than (a)" for task, v in timed.items() if "a" in v]
    lines.append("same results (per-mask scores; log-likelihoods; generated texts):")
    for task, variants in timed.items():
        for key, v in variants.items():
            for reference, diff in ((name[3:], d) for name, d in v.items() if name.startswith("vs_")):
                scores = "identical scores" if diff["max_score_diff"] == 0 else "SCORES DIFFER"
                lines.append(f"  {task} ({key}) vs ({reference}): {scores} (max |diff| {diff['max_score_diff']:.3g}), "
                             f"max |loglik diff| {diff['max_loglik_diff']:.1e}, {diff['different_texts']} different "
                             "generated texts")
    lines.append(f"results {'ARE the same' if all_same else 'DIFFER'} (scores exactly, log-likelihoods within "
                 f"{LOGLIK_TOLERANCE:g}, texts exactly)")
    return lines
