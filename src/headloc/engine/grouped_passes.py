"""The forward passes of a mask group (:class:`~headloc.engine.grouped.GroupedLM`): log-likelihood
scoring with each document row repeated once per mask, and greedy decoding in which a finished row
leaves the batch.

Its own module because it is how one shared pass computes a group's answers, written against
lm-eval's and transformers' internals, while :mod:`headloc.engine.grouped` says what those answers
must be and replays them. :class:`GroupPasses` is mixed into ``GroupedLM`` and reads its
attributes: ``HFLM``'s (``model``, ``tokenizer``, ``batch_size``, ...), the open ``group`` and
``_row_gates``.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from lm_eval.models.utils import Collator
from lm_eval.models.utils_hf import pad_and_concat, stop_sequences_criteria
from transformers import DynamicLayer, EosTokenCriteria, MaxLengthCriteria

from headloc.engine.shared_layers import SharedLayers
from headloc.model.ablation import ablate_heads


class GroupPasses:
    """The passes that compute a mask group's answers, mixed into ``GroupedLM`` (see the module)."""

    shared: SharedLayers | None = None

    def _shared_layers(self) -> SharedLayers:
        """Each layer once per document and branch of the group's masks (one check per model)."""
        if self.shared is None:
            self.shared = SharedLayers(self.model)
        return self.shared

    def _grouped_loglikelihood_tokens(self, requests) -> list[tuple]:
        """``HFLM._loglikelihood_tokens`` for a mask group: one tuple of answers per request.

        The same Collator sorts, batches and shares one-token continuations (``logits_cache``) as
        in lm-eval; each document row is repeated once per mask (each layer run once per document
        and branch of the masks: :mod:`headloc.engine.shared_layers`), and logits are computed only for the
        positions lm-eval scores (``logits_to_keep``), not for the whole context.
        """
        if self.backend != "causal":
            raise ValueError(f"mask groups need a causal LM; this model's backend is {self.backend!r}")
        masks = self.group.size
        re_ord = Collator(
            requests,
            sort_fn=lambda req: (-len(req[1] + req[2]), tuple(req[1] + req[2])),
            group_by="contexts" if self.logits_cache else None,
            group_fn=lambda req: req[-2] + req[-1][:-1],
        )
        keep_arg = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        results = []
        for chunk in re_ord.get_batched(n=max(1, int(self.batch_size) // masks)):
            inputs = [
                torch.tensor((context + continuation)[-(self.max_length + 1):][:-1],
                             dtype=torch.long, device=self.device)
                for _, context, continuation in chunk
            ]
            lengths = [len(row) for row in inputs]  # before pad_and_concat, which edits `inputs`
            width = max(lengths)
            # the first position any row scores; logits before it are never looked at
            first = max(0, min(n - len(cont) for n, (_, _, cont) in zip(lengths, chunk)))
            docs = pad_and_concat(width, inputs, padding_side="right")

            rows = docs.repeat_interleave(masks, dim=0)

            def forward(keep=width - first, first=first):
                if keep_arg:
                    return self.model(rows, logits_to_keep=keep, use_cache=False).logits, None
                return self.model(rows, use_cache=False).logits[:, first:], None

            with torch.no_grad(), torch.autocast(
                device_type=self.device.type, dtype=self.mixed_precision_dtype,
                enabled=self.mixed_precision_dtype is not None,
            ):  # a document's copies agree until their masks branch: each layer runs once per branch
                logits, _ = self._shared_layers().run(len(chunk), self.gate, forward)
            logprobs = F.log_softmax(logits, dim=-1, dtype=self.softmax_dtype)
            logprobs = logprobs.view(len(chunk), masks, *logprobs.shape[1:])
            for (request_str, context, continuation), length, doc_logprobs in zip(chunk, lengths, logprobs):
                end = length - first
                placeholder = torch.empty(1, 0, 0)
                for _, cont, _ in re_ord.get_cache(
                    req_str=request_str, cxt_toks=context, cont_toks=continuation, logits=placeholder,
                ):
                    target = torch.tensor(cont, dtype=torch.long, device=doc_logprobs.device)
                    scored = doc_logprobs[:, end - len(cont):end]  # [masks, len(cont), vocab]
                    exact = (scored.argmax(dim=-1) == target).all(dim=-1)
                    total = scored.gather(2, target.expand(masks, -1).unsqueeze(-1)).squeeze(-1).sum(-1)
                    results.append(tuple(
                        (float(total[m]), bool(exact[m])) for m in range(masks)
                    ))
        return re_ord.get_original(results)

    # ------------------------------------------------------------------ grouped greedy decoding
    #
    # lm-eval's generate_until tokenizes, left-pads and truncates a batch, calls _model_generate and
    # decodes what comes back, cutting at the first stop string. For a mask group, _model_generate
    # is the loop below instead of transformers' generate: the same greedy tokens, but a row leaves
    # the batch (its KV cache and gate rows with it) as soon as it is finished, where generate keeps
    # decoding it until the whole batch stops. A row is finished when lm-eval's own stopping
    # criteria (stop_sequences_criteria, applied to the row alone) or transformers' EOS / max-length
    # criteria fire for it. generate pads a row after EOS (so does this loop) but keeps decoding a
    # row that only saw a stop string, since lm-eval's criterion stops the whole batch, not one row;
    # those extra tokens come after the stop string and lm-eval's post-processing cuts them off, so
    # the answers are the same.

    # generation_config fields that change greedy tokens (logits processors) or the stop rule;
    # anything but their defaults sends the group through transformers' generate.
    _GREEDY_UNSAFE = ("repetition_penalty", "encoder_repetition_penalty", "no_repeat_ngram_size",
                      "bad_words_ids", "min_length", "min_new_tokens", "forced_bos_token_id",
                      "forced_eos_token_id", "suppress_tokens", "begin_suppress_tokens", "sequence_bias",
                      "num_beams", "exponential_decay_length_penalty", "renormalize_logits",
                      "stop_strings", "guidance_scale", "watermarking_config", "max_time")

    def _greedy_loop_applies(self, generation_kwargs) -> bool:
        """Whether HFLM would decode greedily with nothing but stop criteria (see _model_generate)."""
        kwargs = dict(generation_kwargs)
        kwargs.pop("attention_mask", None)
        do_sample, temperature = kwargs.pop("do_sample", None), kwargs.pop("temperature", 0.0)
        greedy = do_sample is False or (do_sample is None and temperature == 0.0)
        config, default = self.model.generation_config, type(self.model.generation_config)()
        plain = all(getattr(config, name, None) == getattr(default, name, None) for name in self._GREEDY_UNSAFE)
        return (greedy and plain and not kwargs and self.backend == "causal"
                and self.think_end_token is None)

    def _grouped_greedy_generate(self, context, max_length, stop, attention_mask):
        """Greedy tokens for ``context`` (rows of a mask group), in generate's output layout."""
        rows, width = context.shape
        # on the rows' device: finished rows leave the gate by indices living there (on a GPU the
        # gate, built on the CPU, could not be indexed by them)
        gate = self._row_gates(context).to(context.device)
        stop_rules = [self._row_stop_rule(stop, max_length - width) for _ in range(rows)]
        live = torch.arange(rows, device=context.device)  # the original row of each batch row
        tokens = [[] for _ in range(rows)]
        # as generate: an all-ones mask is dropped; position ids count real tokens from 0
        mask = attention_mask if attention_mask is not None else torch.ones_like(context)
        positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
        mask = None if bool((mask == 1).all()) else mask
        with torch.no_grad(), torch.autocast(
            device_type=self.device.type, dtype=self.mixed_precision_dtype,
            enabled=self.mixed_precision_dtype is not None,
        ):
            logits, cache = self._prefill(context, mask, positions, gate)
            while True:
                step = logits.argmax(dim=-1)
                keep = []
                for index, (row, token) in enumerate(zip(live.tolist(), step.tolist())):
                    tokens[row].append(token)
                    if not bool(stop_rules[row](torch.tensor([tokens[row]]), None)[0]):
                        keep.append(index)
                if not keep:
                    break
                keep = torch.tensor(keep, device=context.device)
                if len(keep) < len(live):  # drop the finished rows from the cache and the gate
                    cache.batch_select_indices(keep)
                    live = live[keep]
                positions = positions[keep, -1:] + 1
                if mask is not None:
                    mask = torch.cat([mask[keep], mask.new_ones(len(keep), 1)], dim=1)
                logits, cache = self._decode_step(step[keep].unsqueeze(1), mask, positions, cache, gate[live])
        return self._as_generate_output(context, tokens)

    def _prefill(self, context, mask, positions, gate):
        """The prompt pass: last logits and cache, without computing the left padding.

        Rows of equal prompt length share a pass with no padding; their caches are then laid out
        left-padded to the batch's width, where the attention mask keeps the padding out, as in a
        padded pass. (Plain DynamicCache layers only; otherwise one padded pass.)
        """
        if mask is None:
            return self._prompt_pass(context, positions)
        lengths = mask.sum(dim=1)
        rows, width = context.shape
        logits, cache, keys, values = None, None, [], []
        for n in lengths.unique().tolist():
            index = (lengths == n).nonzero().squeeze(1)
            part_logits, part = self._prompt_pass(context[index, width - n:], positions[index, width - n:])
            # the cache's public layer objects: plain DynamicLayers hold keys/values [rows, kv heads, pos, dim]
            if not all(type(layer) is DynamicLayer for layer in part.layers):
                return self._decode_step(context, mask, positions, None, gate)
            if cache is None:  # the first part's cache object will hold the whole batch
                cache = part
                logits = part_logits.new_empty(rows, part_logits.shape[1])
                keys = [layer.keys.new_zeros(rows, *layer.keys.shape[1:2], width, layer.keys.shape[3])
                        for layer in part.layers]
                values = [torch.zeros_like(k) for k in keys]
            logits[index] = part_logits
            for layer, k, v in zip(part.layers, keys, values):
                k[index, :, width - n:] = layer.keys
                v[index, :, width - n:] = layer.values
        for layer, k, v in zip(cache.layers, keys, values):
            layer.keys, layer.values = k, v
        return logits, cache

    def _prompt_pass(self, context, positions):
        """A prompt pass without padding over rows of whole mask groups (``_row_gates`` checked
        the layout): each layer once per document and branch of the masks (SharedLayers)."""
        return self._shared_layers().run(len(context) // self.gate.shape[0], self.gate,
                                         lambda: self._forward(context, None, positions, None))

    def _decode_step(self, inputs, mask, positions, cache, gate):
        """One forward pass (prefill or one token) with ``gate`` per row: last logits, cache."""
        with ablate_heads(self.model, gate):
            return self._forward(inputs, mask, positions, cache)

    def _forward(self, inputs, mask, positions, cache):
        """One forward pass with whatever gates are installed: last logits, cache."""
        keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {}
        out = self.model(input_ids=inputs, attention_mask=mask, position_ids=positions,
                         past_key_values=cache, use_cache=True, **keep)
        return out.logits[:, -1].to(torch.float32), out.past_key_values

    def _row_stop_rule(self, stop, max_new: int):
        """Stopping criteria for one row's generated tokens (a [1, tokens] tensor): lm-eval's stop
        strings, as HFLM builds them for generate, and transformers' EOS and length criteria."""
        rule = stop_sequences_criteria(self.tokenizer, stop, 0, 1)
        rule.append(MaxLengthCriteria(max_new))
        eos = self.model.generation_config.eos_token_id
        if eos is not None:
            rule.append(EosTokenCriteria(eos))
        return rule

    def _as_generate_output(self, context, tokens) -> torch.Tensor:
        """``context`` followed by each row's tokens, padded with the pad token like generate's."""
        longest = max(len(row) for row in tokens)
        pad = self.tokenizer.pad_token_id
        generated = torch.tensor([row + [pad] * (longest - len(row)) for row in tokens],
                                 dtype=context.dtype, device=context.device)
        return torch.cat([context, generated], dim=1)
