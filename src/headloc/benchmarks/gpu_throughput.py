"""The GPU check's sections 4-5 (:mod:`headloc.benchmarks.gpu_check`) on random-weight models of
real geometries (:data:`GEOMETRIES`): masks and tokens per second against the card's measured
matrix-multiply rate, the peak memory against headloc.model.memory's estimate, and the out-of-memory
back-off on a pass far too large for the card.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from headloc.benchmarks.gpu_scores import Report, gold_scores, synchronize
from headloc.search.masks import stratified_masks

# Llama-3.2-1B and Llama-3.1-8B (their config.json), weights random: the cost does not depend on them.
GEOMETRIES = {
    "1B": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    "8B": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    "quick": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=False),
}


def random_model(geometry: str, device: str, dtype=torch.bfloat16, vocab: int = 0):
    """A random-weight Llama of one of :data:`GEOMETRIES` (its vocabulary at least ``vocab``)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {**GEOMETRIES[geometry], "vocab_size": max(GEOMETRIES[geometry]["vocab_size"], vocab)}
    config = LlamaConfig(**shape, max_position_embeddings=4096)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def matmul_rate(device: str, quick: bool) -> float:
    """Measured bf16 (cpu: float32) matrix-multiply FLOP/s on an 8192-cube (quick: 1024)."""
    size = 1024 if quick else 8192
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    start, reps = time.perf_counter(), 10
    for _ in range(reps):
        a @ b
    synchronize(device)
    return 2 * size**3 * reps / (time.perf_counter() - start)


def throughput_section(report: Report, device: str, quick: bool) -> None:
    from headloc.model.memory import Shape

    peak = matmul_rate(device, quick)
    report.say("throughput", "matmul TFLOP/s (bf16)", peak / 1e12)
    for geometry in (["quick"] if quick else ["1B", "8B"]):
        start = time.perf_counter()
        model = random_model(geometry, device, torch.float32 if device == "cpu" else torch.bfloat16)
        synchronize(device)
        shape = Shape.of(model.config.to_dict())
        report.say("throughput", f"{geometry}: build seconds", time.perf_counter() - start,
                   f"{shape.parameters / 1e9:.2f}B parameters, {shape.layers}x{shape.heads} heads")
        masks_per_second(report, model, shape, device, geometry, peak, quick)
        if geometry == "8B" or quick:
            backoff_section(report, model, shape, device, quick)
        del model
        if device != "cpu":
            torch.cuda.empty_cache()


def masks_per_second(report: Report, model, shape, device: str, geometry: str, peak: float, quick: bool) -> None:
    """32 masks at 1, 8 and 32 masks per pass: masks/s, tokens/s against ``peak``, peak memory."""
    from headloc.model.memory import Pass, estimate

    context, docs = (32, 16) if quick else (256, 64)
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(0, shape.vocab, (docs, context), generator=generator)
    gold = torch.randint(0, shape.vocab, (docs,), generator=generator)
    masks = stratified_masks(shape.layers * shape.heads, 32, 0.05, np.random.default_rng(0))
    for per_pass, rows_per_pass in ((1, 64), (8, 128), (32, 256)):
        gold_scores(model, rows, gold, masks[:per_pass], masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
        if device != "cpu":
            torch.cuda.reset_peak_memory_stats()
        synchronize(device)
        start = time.perf_counter()
        gold_scores(model, rows, gold, masks, masks_per_pass=per_pass, rows_per_pass=rows_per_pass)
        synchronize(device)
        seconds = time.perf_counter() - start
        tokens = len(masks) * docs * context
        share = 100 * tokens * 2 * shape.parameters / seconds / peak
        note = f"{tokens / seconds:,.0f} tokens/s, {share:.0f}% of matmul"
        report.say("throughput", f"{geometry}: masks/s, {per_pass} per pass, {rows_per_pass} rows",
                   len(masks) / seconds, note)
        if device != "cpu":
            planned = estimate(shape, "bfloat16", Pass(rows_per_pass, context, kept=1)).total
            report.say("throughput", f"{geometry}: peak GiB measured / estimated",
                       round(torch.cuda.max_memory_allocated() / 2**30, 2), f"estimate {planned / 2**30:.2f} GiB")


def backoff_section(report: Report, model, shape, device: str, quick: bool) -> None:
    """A pass far too large: every position's logits at 2,048 tokens (8B: ~0.5 GiB a row)."""
    from headloc.engine.backoff import RowBudget
    from headloc.model.memory import Pass, estimate

    context, docs = (64, 8) if quick else (2048, 128)
    start_rows = 2 * docs  # the whole work in one pass: 256 rows x 2,048 tokens x 128,256 logits on 8B
    generator = torch.Generator().manual_seed(1)
    rows = torch.randint(0, shape.vocab, (docs, context), generator=generator)
    gold = torch.randint(0, shape.vocab, (docs,), generator=generator)
    masks = stratified_masks(shape.layers * shape.heads, 2, 0.05, np.random.default_rng(1))
    budget = RowBudget(start_rows)
    start = time.perf_counter()
    backed = budget.run(lambda rows_per_pass: gold_scores(model, rows, gold, masks, masks_per_pass=2,
                                                          rows_per_pass=rows_per_pass, keep_all=True))
    report.say("backoff", "start rows -> working rows", f"{start_rows} -> {budget.rows}",
               f"{budget.halvings} halvings, {time.perf_counter() - start:.1f} s")
    direct = gold_scores(model, rows, gold, masks, masks_per_pass=2, rows_per_pass=budget.rows, keep_all=True)
    report.check("backoff", "scores == a run at the working size", bool(np.array_equal(backed, direct)),
                 f"max |diff| {float(np.abs(backed - direct).max()):.2e}")
    if device != "cpu":
        report.check("backoff", "ran out of memory at the start", budget.halvings > 0, f"{budget.halvings} halvings")
        free = torch.cuda.mem_get_info()[0] + torch.cuda.memory_allocated() - shape.parameters * 2
        per_row = estimate(shape, "bfloat16", Pass(1, context)).total - shape.parameters * 2
        report.say("backoff", "rows the estimate fits / working rows", f"{int(free // per_row)} / {budget.rows}")
