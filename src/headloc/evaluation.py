"""Scoring a model with heads ablated, through lm-evaluation-harness.

:class:`AblatedLM` is lm-eval's ``HFLM`` with a head gate installed around every forward pass (the
``_model_call`` / ``_model_generate`` seam lm-eval's own ``SteeredModel`` uses). :class:`MaskEvaluator`
loads one model and builds one lm-eval task once, then scores any number of masks against it.

``MaskEvaluator.evaluate_masks`` receives all the masks of a job at once and, with
``masks_per_pass > 1``, lets a group of masks share every forward pass: each request is run once per
mask of the group, the copies sit in adjacent batch rows and a gate of shape [rows, layers, heads]
gives each row its own mask. The group's answers are computed in the first lm-eval evaluation and
replayed, mask by mask, into one more lm-eval evaluation per remaining mask, so every mask's metrics
come out of lm-eval's own scoring exactly as a one-mask evaluation's would. A group's greedy
generation runs its own decoding loop (no padding in the prompt pass, finished rows leave the
batch) instead of transformers' ``generate``, with the same texts.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from lm_eval.api.registry import register_model
from lm_eval.evaluator import evaluate
from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import Collator
from lm_eval.models.utils_hf import pad_and_concat
from lm_eval.tasks import TaskManager
from lm_eval.tasks._yaml_loader import load_yaml
from tqdm.auto import tqdm
from transformers.cache_utils import DynamicLayer

from headloc.ablation import HeadGeometry, ablate_heads, masks_to_gate
from headloc.models import load_model

TASKS_DIR = Path(__file__).parent / "tasks"
FEWSHOT_SEED = 1234  # lm-eval's simple_evaluate default


@dataclass(frozen=True)
class TaskSpec:
    """One lm-eval task as the workflow uses it.

    Attributes
    ----------
    lm_eval_task : registered task name, e.g. ``headloc_ioi``.
    metric : metric name, optionally with its filter (``acc`` means ``acc,none``).
    chat : apply the tokenizer's chat template to prompts.
    dataset_kwargs : overrides passed to the task's data loader (e.g. ``data_file``).
    """

    lm_eval_task: str
    metric: str = "acc"
    chat: bool = False
    dataset_kwargs: dict = field(default_factory=dict)

    @property
    def metric_key(self) -> str:
        return self.metric if "," in self.metric else f"{self.metric},none"

    def with_data_file(self, path) -> "TaskSpec":
        """The same task reading its documents from the JSONL file ``path``."""
        return replace(self, dataset_kwargs={**self.dataset_kwargs, "data_file": str(path)})


@dataclass
class MaskResult:
    """The score of one mask and the per-document records behind it."""

    score: float
    samples: list[dict]


@dataclass
class _MaskGroup:
    """A group of masks sharing forward passes: the answers of all of them, replayed one by one."""

    size: int
    index: int = 0
    answers: dict = field(default_factory=dict)  # request type -> [mask][request] answer
    requests: dict = field(default_factory=dict)  # request type -> request args of the first run


@register_model("headloc")
class AblatedLM(HFLM):
    """``HFLM`` whose forward passes run with ``self.gate`` applied (None = no ablation).

    ``gate`` is ``[layers, heads]`` (one mask for every row) or, while a mask group is open (see
    :meth:`mask_group`), ``[masks, layers, heads]``: then every request runs once per mask in
    adjacent batch rows (row ``r`` carries mask ``r % masks``), at most ``batch_size`` rows per
    forward pass, and each request type returns the answers of mask ``group.index``.
    """

    gate = None
    group: _MaskGroup | None = None

    # ------------------------------------------------------------------ mask groups

    @contextlib.contextmanager
    def mask_group(self, gate: torch.Tensor):
        """Run the masks of ``gate`` ([masks, layers, heads]) as one group while open."""
        masks = int(gate.shape[0])
        if not isinstance(self.batch_size, int) or self.batch_size < masks:
            raise ValueError(
                f"batch_size {self.batch_size!r} cannot hold a group of {masks} masks: "
                f"use an integer batch_size >= masks_per_pass ({masks})"
            )
        self.gate, self.group = gate, _MaskGroup(masks)
        try:
            yield self.group
        finally:
            self.gate, self.group = None, None

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

    @contextlib.contextmanager
    def _rows_per_pass(self, masks: int):
        """lm-eval's batch size, in rows, rounded down to whole groups of ``masks`` copies."""
        saved = self.batch_size_per_gpu
        self.batch_size_per_gpu = (int(saved) // masks) * masks
        try:
            yield
        finally:
            self.batch_size_per_gpu = saved

    # ------------------------------------------------------------------ request types

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        return self._answers("loglikelihood", requests,
                             lambda: super(AblatedLM, self).loglikelihood(requests, disable_tqdm=disable_tqdm))

    def generate_until(self, requests, disable_tqdm: bool = False):
        def compute():
            if self.group is None:
                return super(AblatedLM, self).generate_until(requests, disable_tqdm=disable_tqdm)
            masks = self.group.size
            copies = [request for request in requests for _ in range(masks)]
            # lm-eval sorts requests by a key equal for the copies (a stable sort) and batches
            # them in order, so the copies stay adjacent; _ablation checks this on every pass.
            with self._rows_per_pass(masks):
                flat = super(AblatedLM, self).generate_until(copies, disable_tqdm=disable_tqdm)
            return [tuple(flat[i * masks:(i + 1) * masks]) for i in range(len(requests))]

        return self._answers("generate_until", requests, compute)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        def compute():
            if self.group is None:
                return super(AblatedLM, self).loglikelihood_rolling(requests, disable_tqdm=disable_tqdm)
            # Rolling windows are rare in headloc's tasks: one mask after another, no sharing.
            gates, per_mask = self.gate, []
            try:
                for gate in gates:
                    self.gate = gate
                    per_mask.append(super(AblatedLM, self).loglikelihood_rolling(requests, disable_tqdm=True))
            finally:
                self.gate = gates
            return list(zip(*per_mask))

        return self._answers("loglikelihood_rolling", requests, compute)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, override_bs=None):
        if self.group is None or self.gate is None or self.gate.dim() != 3:
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
        return self._grouped_loglikelihood_tokens(requests)

    def _grouped_loglikelihood_tokens(self, requests) -> list[tuple]:
        """``HFLM._loglikelihood_tokens`` for a mask group: one tuple of answers per request.

        The same Collator sorts, batches and shares one-token continuations (``logits_cache``) as
        in lm-eval; each document row is repeated once per mask, and logits are computed only
        for the positions lm-eval scores (``logits_to_keep``), not for the whole context.
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
            rows = pad_and_concat(width, inputs, padding_side="right").repeat_interleave(masks, dim=0)
            with torch.no_grad(), torch.autocast(
                device_type=self.device.type, dtype=self.mixed_precision_dtype,
                enabled=self.mixed_precision_dtype is not None,
            ), self._ablation(rows):
                if keep_arg:
                    logits = self.model(rows, logits_to_keep=width - first, use_cache=False).logits
                else:
                    logits = self.model(rows, use_cache=False).logits[:, first:]
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

    # ------------------------------------------------------------------ forward passes

    def _ablation(self, inputs=None):
        """The gate for a pass over ``inputs``; a group gate is tiled over the rows."""
        gate = self.gate
        if gate is None:
            return contextlib.nullcontext()
        if gate.dim() == 3:
            masks, rows = gate.shape[0], inputs.shape[0]
            grouped = inputs.view(rows // masks, masks, -1) if rows % masks == 0 else None
            if grouped is None or not bool((grouped == grouped[:, :1]).all()):
                raise RuntimeError(
                    f"a pass of {rows} rows does not hold each request's {masks} mask copies in "
                    "adjacent rows; lm-eval's batching no longer matches the mask layout"
                )
            gate = gate.repeat(rows // masks, 1, 1)
        return ablate_heads(self.model, gate)

    def _model_call(self, inps, attn_mask=None, labels=None):
        with self._ablation(inps):
            return super()._model_call(inps, attn_mask=attn_mask, labels=labels)

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        ablation = self._ablation(context)  # checks a group's row layout
        if self.group is not None and self.gate is not None and self.gate.dim() == 3 \
                and max_length > context.shape[1] and self._greedy_loop_applies(generation_kwargs):
            return self._grouped_greedy_generate(context, max_length, stop, generation_kwargs.get("attention_mask"))
        with ablation:
            return super()._model_generate(context, max_length, stop, **generation_kwargs)

    # ------------------------------------------------------------------ grouped greedy decoding
    #
    # lm-eval's generate_until tokenizes, left-pads and truncates a batch, calls _model_generate and
    # decodes what comes back, cutting at the first stop string. For a mask group, _model_generate
    # is the loop below instead of transformers' generate: the same greedy tokens, but a row leaves
    # the batch (its KV cache and gate rows with it) as soon as it is finished, where generate keeps
    # decoding it until the whole batch stops. A row is finished when lm-eval's own stopping
    # criterion (MultiTokenEOSCriteria: a stop string in the decoded last len(stop tokens) + 2
    # tokens) or transformers' EOS / max-length criterion fires for it. generate pads a row after
    # EOS (so does this loop) but keeps decoding a row that only saw a stop string, since lm-eval's
    # criterion stops the whole batch, not one row; those extra tokens come after the stop string
    # and lm-eval's post-processing cuts them off, so the answers are the same.

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
        max_new = max_length - width
        finished_by = self._row_stop_rule(stop, max_new)
        gate = self.gate.repeat(rows // self.group.size, 1, 1)
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
                    if not finished_by(tokens[row]):
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
            return self._decode_step(context, None, positions, None, gate)
        lengths = mask.sum(dim=1)
        rows, width = context.shape
        logits, cache, keys, values = None, None, [], []
        for n in lengths.unique().tolist():
            index = (lengths == n).nonzero().squeeze(1)
            part_logits, part = self._decode_step(
                context[index, width - n:], None, positions[index, width - n:], None, gate[index])
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

    def _decode_step(self, inputs, mask, positions, cache, gate):
        """One forward pass (prefill or one token) with ``gate`` per row: last logits, cache."""
        keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {}
        with ablate_heads(self.model, gate):
            out = self.model(input_ids=inputs, attention_mask=mask, position_ids=positions,
                             past_key_values=cache, use_cache=True, **keep)
        return out.logits[:, -1].to(torch.float32), out.past_key_values

    def _row_stop_rule(self, stop, max_new: int):
        """A test on a row's generated tokens: stop string (as lm-eval checks it), EOS or length."""
        eos = self.model.generation_config.eos_token_id
        eos = set([] if eos is None else [eos] if isinstance(eos, int) else eos)
        lookbacks = [(s, len(self.tokenizer.encode(s, add_special_tokens=False)) + 2) for s in stop]

        def finished(generated: list[int]) -> bool:
            return (len(generated) >= max_new or generated[-1] in eos
                    or any(s in self.tokenizer.decode(generated[-n:]) for s, n in lookbacks))

        return finished

    def _as_generate_output(self, context, tokens) -> torch.Tensor:
        """``context`` followed by each row's tokens, padded with the pad token like generate's."""
        longest = max(len(row) for row in tokens)
        pad = self.tokenizer.pad_token_id
        generated = torch.tensor([row + [pad] * (longest - len(row)) for row in tokens],
                                 dtype=context.dtype, device=context.device)
        return torch.cat([context, generated], dim=1)


def task_config(manager: TaskManager, task: TaskSpec) -> dict:
    """The registered task's YAML config with ``task.dataset_kwargs`` merged into its own.

    lm-eval 0.4.13 treats a dict passed to ``TaskManager.load`` as a complete inline task, not as
    overrides of a registered one, so the registered YAML is loaded (includes resolved) here.
    """
    entry = manager.task_index.get(task.lm_eval_task)
    if entry is None or entry.yaml_path is None:
        known = ", ".join(manager.all_subtasks) or "none"
        raise ValueError(f"unknown lm-eval task {task.lm_eval_task!r}; the include path has: {known}")
    config = load_yaml(entry.yaml_path, resolve_func=True)
    config["dataset_kwargs"] = {**(config.get("dataset_kwargs") or {}), **task.dataset_kwargs}
    return config


def require_chat_template(tokenizer, task: TaskSpec) -> None:
    if task.chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"task {task.lm_eval_task} is a chat task but the tokenizer "
            f"{getattr(tokenizer, 'name_or_path', '')!r} has no chat template"
        )


def check_grouping(batch_size, masks_per_pass) -> None:
    """Raise ValueError unless ``batch_size`` rows can hold a group of ``masks_per_pass`` masks."""
    if isinstance(masks_per_pass, bool) or not isinstance(masks_per_pass, (int, np.integer)) \
            or masks_per_pass < 1:
        raise ValueError(f"masks_per_pass must be a positive integer, got {masks_per_pass!r}")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < masks_per_pass:
        raise ValueError(
            f"batch_size {batch_size!r} cannot hold one group of masks_per_pass={masks_per_pass} "
            f"masks: it counts rows per forward pass and must be an integer >= {masks_per_pass}"
        )


class MaskEvaluator:
    """Score masks of one model on one task; the model and task are built once.

    Parameters
    ----------
    model, tokenizer : a loaded transformers causal LM and its tokenizer.
    task : the task and metric to score.
    batch_size : rows per forward pass. With one mask per pass a row is a document; with
        ``masks_per_pass = M`` a row is a (document, mask) pair, so a pass holds
        ``batch_size // M`` documents times M masks.
    masks_per_pass : masks that share each forward pass in :meth:`evaluate_masks` (1 = one mask
        after another, through lm-eval's own batching).
    include_path : folder(s) of task YAMLs (headloc's own tasks by default).

    Memory is bounded by ``batch_size``: a forward pass never holds more than ``batch_size`` rows,
    whatever ``masks_per_pass`` is (activations and logits grow with rows x sequence length, and
    only the scored positions' logits are computed in a mask group). Between passes a group keeps
    one small answer (a log-likelihood or a generated string) per request and mask.
    """

    def __init__(self, model, tokenizer, task: TaskSpec, *, batch_size: int = 16,
                 masks_per_pass: int = 1, include_path=TASKS_DIR):
        check_grouping(batch_size, masks_per_pass)
        require_chat_template(tokenizer, task)
        self.task = task
        self.masks_per_pass = int(masks_per_pass)
        self.geometry = HeadGeometry.of(model.config)
        self.lm = AblatedLM(pretrained=model, tokenizer=tokenizer, batch_size=int(batch_size),
                            device=str(model.device))
        paths = include_path if isinstance(include_path, (list, tuple)) else [include_path]
        manager = TaskManager(include_path=[str(p) for p in paths], include_defaults=False)
        self.task_dict = manager.load([task_config(manager, task)])

    def evaluate(self, gate=None) -> MaskResult:
        """Score the task with ``gate`` ([layers, heads], 1 keeps a head) or unablated."""
        self.lm.gate = gate
        try:
            return self._run()
        finally:
            self.lm.gate = None

    def _run(self) -> MaskResult:
        """One lm-eval evaluation with whatever gate or mask group the LM holds.

        The few-shot sampler is re-seeded first (with simple_evaluate's default seed): lm-eval
        draws few-shot examples from one random stream per task, so without it every mask after
        the first would see other examples (GSM8K's 5 shots) and the scores would differ by
        more than the mask. Code tasks need ``confirm_run_unsafe_code``; the real opt-in is the
        config's ``data.allow_code_execution``, checked by their loaders.
        """
        for task in self.task_dict["tasks"].values():
            task.set_fewshot_seed(FEWSHOT_SEED)
        output = evaluate(
            lm=self.lm, task_dict=self.task_dict, bootstrap_iters=0, log_samples=True,
            apply_chat_template=self.task.chat, verbosity="WARNING", confirm_run_unsafe_code=True,
        )
        name = self.task.lm_eval_task
        metrics = output["results"][name]
        if self.task.metric_key not in metrics:
            known = sorted(k for k in metrics if "," in k and not k.endswith("_stderr,none"))
            raise ValueError(
                f"task {name} reports no metric {self.task.metric_key!r}; it reports {known}"
            )
        samples = [_compact_sample(s, self.task.metric) for s in output["samples"][name]]
        return MaskResult(float(metrics[self.task.metric_key]), samples)

    def evaluate_mask(self, mask) -> MaskResult:
        """Score one mask (1 = ablated), a vector over all heads."""
        mask = np.asarray(mask)
        gate = masks_to_gate(mask, self.geometry) if mask.any() else None
        return self.evaluate(gate)

    def evaluate_group(self, masks) -> list[MaskResult]:
        """Score the rows of ``masks`` (at most ``batch_size`` of them) sharing forward passes."""
        masks = np.atleast_2d(np.asarray(masks))
        gate = masks_to_gate(masks, self.geometry)
        results = []
        with self.lm.mask_group(gate) as group:
            for index in range(len(masks)):
                group.index = index
                results.append(self._run())
        return results

    def evaluate_masks(self, masks, *, progress: bool = True, desc: str = "masks") -> list[MaskResult]:
        """Score each row of ``masks`` (M x N, 1 = ablated), ``masks_per_pass`` at a time."""
        masks = np.atleast_2d(masks)
        results: list[MaskResult] = []
        with tqdm(total=len(masks), desc=desc, disable=not progress) as bar:
            for start in range(0, len(masks), self.masks_per_pass):
                group = masks[start:start + self.masks_per_pass]
                if self.masks_per_pass == 1:
                    results.append(self.evaluate_mask(group[0]))
                else:
                    results.extend(self.evaluate_group(group))
                bar.update(len(group))
        return results


def _compact_sample(sample: dict, metric: str) -> dict:
    """The parts of an lm-eval sample record worth keeping for inspection."""
    response = sample.get("filtered_resps", sample.get("resps"))
    while isinstance(response, list) and len(response) == 1:
        response = response[0]
    name = metric.split(",")[0]
    return {"doc_id": sample["doc_id"], "target": sample.get("target"), "response": response,
            name: sample.get(name)}


def load_evaluator(location: str, task: TaskSpec, *, dtype="float32", device="cpu",
                   batch_size=16, masks_per_pass=1, include_path=TASKS_DIR) -> MaskEvaluator:
    """Load the model at ``location`` once and build an evaluator for ``task``."""
    check_grouping(batch_size, masks_per_pass)
    model, tokenizer = load_model(location, dtype=dtype, device=device)
    return MaskEvaluator(model, tokenizer, task, batch_size=batch_size,
                         masks_per_pass=masks_per_pass, include_path=include_path)
