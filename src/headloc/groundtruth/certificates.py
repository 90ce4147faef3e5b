"""Whether a planted model's truth holds on the searches' own score: a task's certificate and an interaction's.

The score is the gold's mean log-probability among the choices. A planted effect is certified when it
stands clear of the heads outside the planted set, the tail (its largest single effect and its spread,
tau), by CERTIFY_LARGEST and CERTIFY_SPREAD. Arithmetic on the effects
:mod:`headloc.groundtruth.truth` measures, so that a certificate can be checked by hand.
"""

from __future__ import annotations

import numpy as np

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
