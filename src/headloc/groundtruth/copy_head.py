"""The smallest planted head: a head trained to be the only path from the first token to the last.

A row of random tokens is to be continued by its first token. The model is trained with every head
but ``planted`` gated off, so that head alone learns to move the first token to the last position
(MLPs and norms act per position; nothing else can); afterwards every other head's output columns
are scaled down by ``noise``: small, untrained perturbations. Removing ``planted`` destroys the task
by construction. The tests' planted model (tests/planted.py) and the GPU check
(benchmarks/gpu_check.py) are trained here. Torch only.
"""

from __future__ import annotations

import torch

from headloc.heads import HeadGeometry
from headloc.model.ablation import ablate_heads, hook_module_path


def plant_copy_head(model, planted: tuple[int, int], *, steps: int, rows: int, length: int, first_token: int,
                    lr: float, noise: float, seed: int):
    """Train ``model`` (a fresh causal LM, on its device) in place; returns it in eval mode.

    Each step draws ``rows`` rows of ``length`` tokens in ``[first_token, vocab)`` from a generator
    seeded with ``seed`` and fits the last position to the row's first token with Adam (``lr``).
    """
    geometry = HeadGeometry.of(model.config)
    device = next(model.parameters()).device
    only = torch.zeros(geometry.n_layers, geometry.n_heads)
    only[planted] = 1.0
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        batch = torch.randint(first_token, model.config.vocab_size, (rows, length), generator=generator).to(device)
        with ablate_heads(model, only):
            logits = model(batch).logits[:, -1]
        loss = torch.nn.functional.cross_entropy(logits, batch[:, 0])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        for layer in range(geometry.n_layers):
            weight = model.get_submodule(hook_module_path(model, layer)).weight
            d_head = weight.shape[1] // geometry.n_heads
            for head in range(geometry.n_heads):
                if (layer, head) != tuple(planted):
                    weight[:, head * d_head:(head + 1) * d_head] *= noise
    return model
