"""Grouped evaluation: several masks share every forward pass (``masks_per_pass > 1``).

The contract
------------
:class:`GroupedLM` is an :class:`~headloc.engine.lm.AblatedLM`; outside a mask group it is exactly
that seam. For masks ``m_0 .. m_{G-1}`` (a gate ``[G, layers, heads]``)::

    lm.run_group(gate, evaluate_one)

calls ``evaluate_one()`` (one lm-eval ``evaluate()``) G times and returns its G results; result
``i`` equals what ``evaluate_one()`` returns with an ``AblatedLM`` whose gate is ``m_i``: the
same answers to every request, hence the same metrics, per-document samples and generated texts
(log-likelihoods up to the float rounding of another batch layout). A forward pass never holds
more than ``batch_size`` rows. ``tests/integration/test_multimask.py`` is this contract, run
against both paths.

How
---
The first ``evaluate()`` of a group computes the answers of all G masks: every request is run once
per mask, the copies in adjacent batch rows, and row ``r`` carries mask ``r % G`` (the gate is
tiled over the rows; :meth:`GroupedLM.ablation` checks the layout on every pass). The answers are
kept per request type and replayed, mask by mask, into the remaining ``evaluate()`` runs, which
must ask for the same requests (checked). So each mask's metrics come out of lm-eval's own
scoring. Three request paths compute a group's answers:

* log-likelihood: :meth:`GroupedLM._loglikelihood_tokens` scores each document row G times in one
  pass, computing logits only for the positions lm-eval scores, each layer once per document and
  branch of the masks (:mod:`headloc.engine.shared_layers`);
* generation: lm-eval's ``generate_until`` on G copies of each request; greedy requests then
  decode in :meth:`GroupedLM._grouped_greedy_generate` (no padding in the prompt pass, which runs
  each layer once per document and branch; finished rows leave the batch), the others in
  transformers' ``generate``;
* rolling log-likelihood (rare in headloc's tasks): one mask after another, no sharing.

The first two paths' passes are :class:`~headloc.engine.grouped_passes.GroupPasses`, a mixin of
``GroupedLM``.

Assumptions
-----------
The engine relies on lm-eval's ``HFLM`` internals (its ``_loglikelihood_tokens``, sorting copies
of a request next to each other, ``batch_size_per_gpu``) and on transformers' ``DynamicCache``
layout. It was checked with the versions in :data:`CHECKED_VERSIONS` (pyproject.toml's pins);
:func:`version_problem` says when the installed ones differ, and ``MaskEvaluator`` then warns and
scores one mask at a time.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from dataclasses import dataclass, field

import torch

from headloc.model.ablation import ablate_heads
from headloc.engine.grouped_passes import GroupPasses
from headloc.engine.lm import AblatedLM

# The versions the engine was checked with: pyproject.toml's pins (test_multimask keeps them equal).
CHECKED_VERSIONS = {"lm-eval": "0.4.13", "transformers": "5.23.0"}


def version_problem() -> str | None:
    """Why the engine's assumptions may not hold with the installed packages, or None."""
    found = {name: importlib.metadata.version(name) for name in CHECKED_VERSIONS}
    other = [f"{name} {found[name]}" for name, version in CHECKED_VERSIONS.items() if found[name] != version]
    if not other:
        return None
    checked = ", ".join(f"{name} {version}" for name, version in CHECKED_VERSIONS.items())
    return f"grouped evaluation was checked with {checked}, but {' and '.join(other)} is installed"


@dataclass
class MaskGroup:
    """A group of masks sharing forward passes: the answers of all of them, replayed one by one."""

    size: int
    index: int = 0
    answers: dict = field(default_factory=dict)  # request type -> [mask][request] answer
    requests: dict = field(default_factory=dict)  # request type -> request args of the first run


class GroupedLM(GroupPasses, AblatedLM):
    """:class:`~headloc.engine.lm.AblatedLM` that can score a group of masks at once (see the module).

    While a group is open, ``gate`` is ``[masks, layers, heads]`` and ``group.index`` is the mask
    whose answers lm-eval receives.
    """

    group: MaskGroup | None = None

    # ------------------------------------------------------------------ the contract

    def run_group(self, gate: torch.Tensor, evaluate_one) -> list:
        """``evaluate_one()`` once per mask of ``gate`` ([masks, layers, heads]), sharing passes."""
        results = []
        with self.mask_group(gate) as group:
            for index in range(group.size):
                group.index = index
                results.append(evaluate_one())
        return results

    @contextlib.contextmanager
    def mask_group(self, gate: torch.Tensor):
        """Run the masks of ``gate`` ([masks, layers, heads]) as one group while open."""
        masks = int(gate.shape[0])
        if not isinstance(self.batch_size, int) or self.batch_size < masks:
            raise ValueError(
                f"batch_size {self.batch_size!r} cannot hold a group of {masks} masks: "
                f"use an integer batch_size >= masks_per_pass ({masks})"
            )
        self.gate, self.group = gate, MaskGroup(masks)
        try:
            yield self.group
        finally:
            self.gate, self.group = None, None

    # ------------------------------------------------------------------ replay (lm-eval's LM API)

    def _answers(self, kind: str, requests, compute):
        """This mask's answers: computed for the whole group on its first run, then replayed."""
        group = self.group
        if group is None:
            return compute()
        args = [getattr(request, "args", request) for request in requests]
        if kind not in group.answers:
            per_request = compute()  # one tuple of `group.size` answers per request
            group.answers[kind] = [[answers[m] for answers in per_request] for m in range(group.size)]
            group.requests[kind] = args
        elif args != group.requests[kind]:
            raise RuntimeError(
                f"lm-eval asked for different {kind} requests while replaying mask {group.index} "
                "of a mask group; the task must build the same requests on every evaluation"
            )
        return group.answers[kind][group.index]

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        return self._answers("loglikelihood", requests,
                             lambda: super(GroupedLM, self).loglikelihood(requests, disable_tqdm=disable_tqdm))

    def generate_until(self, requests, disable_tqdm: bool = False):
        def compute():
            if self.group is None:
                return super(GroupedLM, self).generate_until(requests, disable_tqdm=disable_tqdm)
            masks = self.group.size
            copies = [request for request in requests for _ in range(masks)]
            # lm-eval sorts requests by a key equal for the copies (a stable sort) and batches
            # them in order, so the copies stay adjacent; ablation() checks this on every pass.
            with self._rows_per_pass(masks):
                flat = super(GroupedLM, self).generate_until(copies, disable_tqdm=disable_tqdm)
            return [tuple(flat[i * masks:(i + 1) * masks]) for i in range(len(requests))]

        return self._answers("generate_until", requests, compute)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        def compute():
            if self.group is None:
                return super(GroupedLM, self).loglikelihood_rolling(requests, disable_tqdm=disable_tqdm)
            gates, per_mask = self.gate, []
            try:
                for gate in gates:
                    self.gate = gate
                    per_mask.append(super(GroupedLM, self).loglikelihood_rolling(requests, disable_tqdm=True))
            finally:
                self.gate = gates
            return list(zip(*per_mask))

        return self._answers("loglikelihood_rolling", requests, compute)

    @contextlib.contextmanager
    def _rows_per_pass(self, masks: int):
        """lm-eval's batch size, in rows, rounded down to whole groups of ``masks`` copies."""
        saved = self.batch_size_per_gpu  # HFLM's attribute behind its batch_size property
        self.batch_size_per_gpu = (int(saved) // masks) * masks
        try:
            yield
        finally:
            self.batch_size_per_gpu = saved

    # ------------------------------------------------------------------ forward passes

    def _grouped(self) -> bool:
        return self.group is not None and self.gate is not None and self.gate.dim() == 3

    def _row_gates(self, inputs: torch.Tensor) -> torch.Tensor:
        """The group's gate tiled over the rows of ``inputs``, after checking the rows' layout."""
        masks, rows = self.gate.shape[0], inputs.shape[0]
        grouped = inputs.view(rows // masks, masks, -1) if rows % masks == 0 else None
        if grouped is None or not bool((grouped == grouped[:, :1]).all()):
            raise RuntimeError(
                f"a pass of {rows} rows does not hold each request's {masks} mask copies in "
                "adjacent rows; lm-eval's batching no longer matches the mask layout"
            )
        return self.gate.repeat(rows // masks, 1, 1)

    def ablation(self, inputs):
        if self.gate is None or self.gate.dim() != 3:
            return super().ablation(inputs)
        return ablate_heads(self.model, self._row_gates(inputs))

    # HFLM's private scoring loop, overridden (while a group is open) to score each row G times.
    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        if not self._grouped():
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
        return self._grouped_loglikelihood_tokens(requests)

    # HFLM's private generate call (the seam), overridden to decode a group's greedy requests itself.
    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        if self._grouped() and max_length > context.shape[1] and self._greedy_loop_applies(generation_kwargs):
            return self._grouped_greedy_generate(context, max_length, stop, generation_kwargs.get("attention_mask"))
        return super()._model_generate(context, max_length, stop, **generation_kwargs)
