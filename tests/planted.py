"""A tiny Llama with a planted head: the only path from the first token to the last position.

Task: a row of ``LENGTH`` random tokens; the model must repeat the first one at the end (the gold
continuation of context ``t0 .. t_{LENGTH-1}`` is ``t0``). The model is trained for a few hundred
steps with every head but ``PLANTED`` gated off, so that head alone learns to move ``t0`` to the
last position (MLPs and norms act per position; nothing else can). The other heads stay at their
random initialisation with their output columns scaled down by ``NOISE``: small, untrained
perturbations. Removing ``PLANTED`` therefore destroys the task by construction, whatever any
search method says, and the other heads' effects are small.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from headloc.groundtruth import copy_head
from headloc.groundtruth.copy_head import plant_copy_head
from headloc.model.ablation import ablate_heads, hook_module_path
from headloc.engine.supervision import Example

VOCAB, LENGTH, FIRST_TOKEN = 24, 6, 3
N_LAYERS, N_HEADS = 2, 4
PLANTED = (1, 2)  # layer, head
NOISE = 0.1


@functools.lru_cache(maxsize=None)
def planted_model(steps: int = 150, seed: int = 0) -> LlamaForCausalLM:
    """Loaded once per process from :func:`planted_dir`; callers must not modify it."""
    model = LlamaForCausalLM.from_pretrained(planted_dir(steps, seed), attn_implementation="eager")
    return model.eval()


def planted_dir(steps: int = 150, seed: int = 0) -> Path:
    """The trained model as a checkpoint folder, trained once for every test process (~10-20 s on
    2 busy cores, which three modules paid each before) and cached under results/test-cache, keyed
    on this file's text and torch's version, so an edited recipe trains afresh."""
    from conftest import cached

    # the recipe's text (this file's and the training's) and torch's version (another torch may train
    # other weights from the same seed)
    recipe = Path(__file__).read_bytes() + Path(copy_head.__file__).read_bytes()
    key = hashlib.sha256(recipe + torch.__version__.encode()).hexdigest()[:12]
    return cached(f"planted-{steps}-{seed}-{key}", lambda out: _train(steps, seed).save_pretrained(out))


def _train(steps: int, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=N_LAYERS,
                         num_attention_heads=N_HEADS, num_key_value_heads=N_HEADS, max_position_embeddings=64,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    config._attn_implementation = "eager"
    return plant_copy_head(LlamaForCausalLM(config), PLANTED, steps=steps, rows=64, length=LENGTH,
                           first_token=FIRST_TOKEN, lr=1e-2, noise=NOISE, seed=seed)


def planted_examples(n: int, seed: int = 1) -> list[Example]:
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randint(FIRST_TOKEN, VOCAB, (n, LENGTH), generator=generator).tolist()
    return [Example(i, tuple(row), (row[0],)) for i, row in enumerate(rows)]


def accuracy(model, examples, gate=None) -> float:
    rows = torch.tensor([list(e.context) for e in examples])
    gold = torch.tensor([e.target[0] for e in examples])
    with torch.no_grad(), ablate_heads(model, gate if gate is not None else torch.ones(N_LAYERS, N_HEADS)):
        predicted = model(rows).logits[:, -1].argmax(-1)
    return float((predicted == gold).float().mean())


def flat(layer: int, head: int) -> int:
    return layer * N_HEADS + head


def weakened(model, scale: float):
    """A copy of ``model`` whose planted head's output is scaled by ``scale``: a less saturated task."""
    import copy

    copied = copy.deepcopy(model)
    d_head = copied.config.hidden_size // N_HEADS
    layer, head = PLANTED
    with torch.no_grad():
        copied.get_submodule(hook_module_path(copied, layer)).weight[:, head * d_head:(head + 1) * d_head] *= scale
    return copied


def reference_score(model, examples, gate=None) -> float:
    """Mean gold-continuation log-likelihood, one unpadded document at a time with full logits.

    Independent of headloc.engine.gold_scoring's batching, padding and logits_to_keep.
    """
    total = 0.0
    for example in examples:
        tokens = torch.tensor([list(example.context) + list(example.target)])
        ablation = contextlib.nullcontext() if gate is None else ablate_heads(model, gate)
        with torch.no_grad(), ablation:
            logits = model(tokens[:, :-1]).logits[0].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        n = len(example.target)
        positions = range(tokens.shape[1] - 1 - n, tokens.shape[1] - 1)
        total += sum(float(logprobs[p, t]) for p, t in zip(positions, example.target))
    return total / len(examples)
