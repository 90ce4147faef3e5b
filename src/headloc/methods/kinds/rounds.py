"""Kind ``rounds``: greedy rounds; round r ablates the heads chosen in rounds 1..r-1 plus each
remaining head in turn and keeps the most damaging (greedy's ``top_k`` rounds), ranked from its rounds.

Steps, per round: :func:`round_masks` (rule make_greedy_masks), the scoring (rule
score_greedy_masks), :func:`choose_head` (rule choose_greedy_head); then the recovery (rule
recover_heads), which reads every round's record.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headloc.heads import HeadGeometry
from headloc.io import read_json, save_npy, write_json
from headloc.methods.contract import scored_masks
from headloc.methods.kinds import Kind, SearchFiles
from headloc.methods.steps import RecoverInputs, RecoverParams


class Rounds(Kind):
    name = "rounds"
    scored = True
    chunked = True
    steps = {"recover": RecoverParams}  # a round's steps are told only its number
    unassessed = ("measured", "greedy's rounds measure each head but their per-document scores are not resampled")

    def recovery_inputs(self, files: SearchFiles, search, model=()) -> RecoverInputs:
        """Every round's record (``chosen.json``), rounds 1..top_k."""
        return RecoverInputs(rounds=[files.chosen(r) for r in range(1, search.settings.top_k + 1)])

    def drive(self, search, job) -> RecoverInputs:
        files, universal = job.files, job.universal_file()
        for r in range(1, search.settings.top_k + 1):
            previous = files.chosen(r - 1) if r > 1 else None
            masks = round_masks(job.geometry, previous, universal, files.masks(f"round{r}"), job.log)
            job.scored(masks, f"round{r}")
            choose_head(r, job.geometry, files.masks(f"round{r}"), files.scores(f"round{r}"), previous, universal,
                        files.chosen(r), job.log)
        return self.recovery_inputs(files, search)


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
