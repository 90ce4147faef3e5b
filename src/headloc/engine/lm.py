"""``AblatedLM``: lm-eval's Hugging Face model (``HFLM``) with attention heads ablated.

Registered with lm-eval as model ``headloc``, so ``lm_eval --model headloc --model_args
pretrained=...,heads=L0H1+L1H2`` scores a task with those heads zeroed. Its own module so that the
evaluator (:mod:`headloc.engine.evaluation`) and the grouped engine (:mod:`headloc.engine.grouped`,
a subclass) both import it and neither imports the other back.
"""

from __future__ import annotations

import contextlib

from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

from headloc.heads import NO_HEADS, headset_mask, parse_headset
from headloc.model.ablation import HeadGeometry, ablate_heads, masks_to_gate


@register_model("headloc")
class AblatedLM(HFLM):
    """``HFLM`` whose forward passes run with the heads of ``self.gate`` ablated.

    ``gate`` is None (no ablation) or a ``[layers, heads]`` tensor, 1 keeps a head and 0 removes it;
    :class:`MaskEvaluator` sets it between evaluations. ``heads`` (a head set such as
    ``"L0H1+L1H2"``, or ``"none"``) sets it once, for lm-eval's ``--model_args``; every other
    argument is ``HFLM``'s.
    """

    gate = None

    def __init__(self, pretrained, heads: str | None = None, **kwargs):
        super().__init__(pretrained=pretrained, **kwargs)
        if heads not in (None, NO_HEADS):
            geometry = HeadGeometry.of(self.model.config)
            mask = headset_mask(parse_headset(str(heads)), geometry.n_layers, geometry.n_heads)
            self.gate = masks_to_gate(mask, geometry)

    def ablation(self, inputs):
        """The gate, as a context manager, for one forward pass over ``inputs`` ([rows, tokens])."""
        return contextlib.nullcontext() if self.gate is None else ablate_heads(self.model, self.gate)

    # HFLM's two forward-pass methods: the seam lm-eval's SteeredModel wraps too.
    def _model_call(self, inps, *args, **kwargs):
        with self.ablation(inps):
            return super()._model_call(inps, *args, **kwargs)

    def _model_generate(self, context, *args, **kwargs):
        with self.ablation(context):
            return super()._model_generate(context, *args, **kwargs)
