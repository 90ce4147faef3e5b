"""What every section of the GPU check (:mod:`headloc.benchmarks.gpu_check`) shares: the
:class:`Report` its figures and checks go to, and :func:`gold_scores`, the score it measures (the gold
token's mean log-probability at the last position, many masks sharing each forward pass, one gate row
per batch row, as the engine does). Torch and numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from headloc.heads import HeadGeometry
from headloc.model.ablation import ablate_heads, masks_to_gate


@dataclass
class Report:
    """Every figure by section and name, and the checks that failed; each line is logged as it comes."""

    figures: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    log: object = print

    def say(self, section: str, name: str, value, note: str = "") -> None:
        self.figures.setdefault(section, {})[name] = value
        shown = f"{value:.4g}" if isinstance(value, float) else value
        self.log(f"{section:<11} {name:<38} {shown}{'  ' + note if note else ''}")

    def check(self, section: str, name: str, ok: bool, detail: str) -> None:
        self.say(section, name, "ok" if ok else "FAILED", detail)
        if not ok:
            self.failed.append(f"{section}: {name} ({detail})")


def synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def gold_scores(model, rows: torch.Tensor, gold: torch.Tensor, masks: np.ndarray, *, masks_per_pass: int,
                rows_per_pass: int, keep_all: bool = False) -> np.ndarray:
    """Mean gold log-probability at the last position per mask (1 = ablated): ``masks_per_pass``
    masks share each pass, each document repeated once per mask, ``rows_per_pass`` rows at most (as
    the engine); ``keep_all`` keeps every position's logits (the memory of a generation pass)."""
    geometry = HeadGeometry.of(model.config)
    device = model.get_input_embeddings().weight.device
    docs_per_pass = max(1, rows_per_pass // masks_per_pass)
    totals = np.zeros(len(masks))
    for start in range(0, len(masks), masks_per_pass):
        group = masks[start:start + masks_per_pass]
        gate = masks_to_gate(group, geometry)
        for first in range(0, len(rows), docs_per_pass):
            docs = rows[first:first + docs_per_pass].to(device)
            batch = docs.repeat_interleave(len(group), dim=0)
            with torch.no_grad(), ablate_heads(model, gate.repeat(len(docs), 1, 1)):
                logits = model(batch, logits_to_keep=0 if keep_all else 1, use_cache=False).logits[:, -1]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            target = gold[first:first + docs_per_pass].to(device).repeat_interleave(len(group))
            picked = logprobs.gather(1, target[:, None]).view(len(docs), len(group))
            totals[start:start + len(group)] += picked.sum(0).double().cpu().numpy()
    return totals / len(rows)
