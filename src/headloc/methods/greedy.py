"""Greedy search (the paper's baseline and headloc's reference): ``top_k`` rounds; round r ablates
the r - 1 heads already chosen plus each remaining head in turn and keeps the most damaging
(:mod:`headloc.search.greedy`; steps round_masks and choose_head of :mod:`headloc.methods.steps`).
With the universal filter on, its rounds leave the universal heads out (``_xu`` in its name)."""

from headloc.methods.contract import SCALE, Method


def recover(inputs, names, params, log) -> dict:
    from headloc.io import read_json
    from headloc.search.recovery import greedy_recovery

    rounds = [read_json(path) for path in inputs.rounds]
    return greedy_recovery(rounds, names, exclude=rounds[-1].get("excluded", []))


def choose_round(previous: dict | None, masks, scores, names: list[str], universal: list[str] = ()) -> dict:
    """One round's record (``chosen.json``): the head whose addition to the ``previous`` round's
    choice lowers the score most, from the round's masks (:func:`headloc.search.greedy.round_masks`)
    and their scores; ``universal`` heads are never candidates. Round 1 (``previous`` None) scores
    every head alone, so it also records the universal heads' one-shot scores."""
    import numpy as np

    from headloc.search import greedy

    previous = previous or {"chosen": [], "n_evals": 0}
    chosen = [names.index(h) for h in previous["chosen"]]
    excluded = [names.index(h) for h in universal]
    scores = np.asarray(scores, dtype=float)
    best, by_head = greedy.choose(masks, scores, chosen, exclude=excluded)
    return {
        "round": len(chosen) + 1,
        "chosen": [*previous["chosen"], names[best]],
        "score": float(by_head[best]),
        "unablated": float(scores[0]) if not chosen else previous["unablated"],
        "n_evals": previous["n_evals"] + len(masks),
        "excluded": list(universal),
        # round 1 scores every head alone, the excluded ones too: their one-shot score
        "excluded_scores": ({h: float(scores[1 + i]) for h, i in zip(universal, excluded)}
                            if not chosen else previous.get("excluded_scores", {})),
        "scores": {names[i]: float(s) for i, s in enumerate(by_head) if not np.isnan(s)},
    }


def search_id(parts) -> str:
    return f"greedy_k{parts.top_k}{'_xu' if parts.universal_filter else ''}_{parts.tail}"


# how to read its heatmap (the caption in Snakemake's report)
READING = """A chosen head's cell is the change in the task's score (a fraction) its addition caused in the
greedy round it was chosen in; every other head's, the change it would have caused in the last round.

""" + SCALE


METHODS = (
    Method(name="greedy", kind="rounds", recover=recover, search_id=search_id, excludes_universal=True, marker="s",
           about="greedy search: top_k rounds, each keeping the most damaging head",
           label="score change when added (greedy round)", reading=READING),
)
