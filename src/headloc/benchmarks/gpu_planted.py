"""The GPU check's sections 1-3 (:mod:`headloc.benchmarks.gpu_check`) on a small Llama trained here
so that one head alone copies the first token to the last position: the search must rank that head
first and 8 masks a pass must score as 1; then the same masks in bfloat16 against float32, and (on a
GPU) the model split over the GPU and the CPU against one device.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from headloc.benchmarks.gpu_scores import Report, gold_scores, synchronize
from headloc.heads import HeadGeometry, format_head
from headloc.search.masks import single_head_masks, stratified_masks


@dataclass(frozen=True)
class Planted:
    """A planted copy task: ``planted`` (layer, head) alone moves a row's first token (drawn from
    ``first_token`` up to ``vocab``) to the row's end, ``length`` tokens."""

    vocab: int = 64
    length: int = 12
    layers: int = 4
    heads: int = 8
    hidden: int = 128
    planted: tuple = (2, 5)
    first_token: int = 3
    noise: float = 0.1

    def rows(self, n: int = 64, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` rows of the task and their gold tokens (each row's first)."""
        rows = torch.randint(self.first_token, self.vocab, (n, self.length),
                             generator=torch.Generator().manual_seed(seed))
        return rows, rows[:, 0].clone()


def planted_model(task: Planted, device: str, steps: int, seed: int = 0):
    """A Llama whose head ``task.planted`` alone moves the first token to the last position."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from headloc.groundtruth.copy_head import plant_copy_head

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=task.vocab, hidden_size=task.hidden, intermediate_size=2 * task.hidden,
                         num_hidden_layers=task.layers, num_attention_heads=task.heads,
                         num_key_value_heads=task.heads, max_position_embeddings=64, bos_token_id=1,
                         eos_token_id=2, pad_token_id=0)
    return plant_copy_head(LlamaForCausalLM(config).to(device), task.planted, steps=steps, rows=256,
                           length=task.length, first_token=task.first_token, lr=3e-3, noise=task.noise, seed=seed)


def planted_section(report: Report, device: str, quick: bool) -> None:
    """Train the planted model, then :func:`planted_checks` it."""
    task = Planted()
    start = time.perf_counter()
    model = planted_model(task, device, steps=60 if quick else 400)
    synchronize(device)
    report.say("planted", "training seconds", time.perf_counter() - start)
    planted_checks(report, model, task)


def planted_checks(report: Report, model, task: Planted) -> None:
    """The planted head found first; 8 masks per pass score as 1; then bf16 (and, on a GPU, a
    model split over GPU and CPU) against these float32 scores."""
    rows, gold = task.rows()
    n = HeadGeometry.of(model.config).total
    masks = np.vstack([single_head_masks(n), stratified_masks(n, 16, 0.1, np.random.default_rng(0))])
    # row 0 unablated, then 1 per head
    fp32 = gold_scores(model, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    planted = task.planted[0] * task.heads + task.planted[1]
    effects = fp32[1:n + 1] - fp32[0]
    report.say("planted", "score unablated (mean log p)", float(fp32[0]))
    report.say("planted", "score, planted head ablated", float(fp32[1 + planted]),
               f"chance: {-np.log(task.vocab - task.first_token):.3f}")
    top = int(np.argmin(effects))
    report.check("planted", "top single-head effect is planted", top == planted,
                 f"top {format_head(*divmod(top, task.heads))}, planted {format_head(*task.planted)}")
    one_at_a_time = gold_scores(model, rows, gold, masks, masks_per_pass=1, rows_per_pass=64)
    difference = float(np.abs(one_at_a_time - fp32).max())
    report.check("planted", "8 masks/pass == 1 mask/pass", difference < 1e-4, f"max |diff| {difference:.2e}")
    bf16_section(report, model, rows, gold, masks, fp32, planted)
    if model.device.type == "cuda":
        device_map_section(report, model, rows, gold, masks, fp32)


def bf16_section(report: Report, model, rows, gold, masks, fp32, planted: int) -> None:
    from scipy.stats import spearmanr

    n = HeadGeometry.of(model.config).total
    bf16_model = type(model)(model.config).to(model.device)
    bf16_model.load_state_dict(model.state_dict())
    bf16_model.to(torch.bfloat16).eval()
    bf16 = gold_scores(bf16_model, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    effects32, effects16 = fp32[1:n + 1] - fp32[0], bf16[1:n + 1] - bf16[0]
    report.say("bf16", "max |score bf16 - fp32| (nats)", float(np.abs(bf16 - fp32).max()))
    report.say("bf16", "max |score| relative difference", float((np.abs(bf16 - fp32) / np.abs(fp32)).max()))
    report.say("bf16", "spearman of single-head effects", float(spearmanr(effects32, effects16).statistic))
    top32, top16 = np.argsort(effects32)[:5], np.argsort(effects16)[:5]
    report.say("bf16", "top-5 overlap (of 5)", len(set(top32) & set(top16)))
    report.check("bf16", "top head agrees", int(top16[0]) == int(top32[0]) == planted, f"bf16 top {int(top16[0])}")
    report.say("bf16", "spearman of the 16 masks' scores", float(spearmanr(fp32[n + 1:], bf16[n + 1:]).statistic))


def device_map_section(report: Report, model, rows, gold, masks, fp32) -> None:
    from accelerate import dispatch_model

    split = type(model)(model.config)
    split.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    layers = model.config.num_hidden_layers
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.norm": "cpu", "lm_head": "cpu",
                  **{f"model.layers.{i}": (0 if i < layers // 2 else "cpu") for i in range(layers)}}
    split = dispatch_model(split.eval(), device_map=device_map)
    scores = gold_scores(split, rows, gold, masks, masks_per_pass=8, rows_per_pass=256)
    difference = float(np.abs(scores - fp32).max())
    report.check("device_map", "GPU+CPU split == one GPU", difference < 1e-4,
                 f"layers 0-{layers // 2 - 1} on cuda:0, the rest on cpu; max |diff| {difference:.2e}")
