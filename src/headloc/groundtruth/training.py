"""What both schemes of planted models share: the tokenizer, the Llama config and the text training.

Its own module so that the two schemes, :mod:`headloc.groundtruth.frozen` and
:mod:`headloc.groundtruth.construct`, both import it, neither the other.
"""

from __future__ import annotations

import math

import torch

from headloc.groundtruth import tasks as T
from headloc.groundtruth.general_text import sample_text, text_token_ids
from headloc.groundtruth.recipe import Recipe


def make_tokenizer(recipe: Recipe):
    """A word-level PreTrainedTokenizerFast: one token per whitespace-separated word, no BOS/EOS added."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = T.token_ids(recipe.design)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>", model_max_length=64)


def make_config(recipe: Recipe, *, hidden: int | None = None, bias: bool = True):
    """Llama with ``heads`` query heads of ``head_dim`` per layer, no GQA, biases on q/k/v/o.

    The attention biases give every key a content-independent part (heads can find a position or
    a token class from the start of training). The constructed scheme has none, and a residual
    wider than ``size.hidden`` (``hidden``: its task dims)."""
    from transformers import LlamaConfig

    size = recipe.size
    vocab = T.vocabulary(recipe.design)
    return LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden or size.hidden, intermediate_size=size.mlp,
        num_hidden_layers=size.layers, num_attention_heads=size.heads, num_key_value_heads=size.heads,
        head_dim=size.head_dim, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
        attention_bias=bias, pad_token_id=vocab.index("<pad>"), bos_token_id=vocab.index("<s>"),
        eos_token_id=vocab.index("</s>"),
    )


def cosine(warmup: int, steps: int):
    """Linear warm-up over ``warmup`` steps, then a cosine from 1 to 0.1 at ``steps``."""
    def lr_at(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
    return lr_at


def text_batch_loss(model, design, tables, rows: int, rng) -> torch.Tensor:
    text = torch.from_numpy(text_token_ids(design, sample_text(design, tables, rows, rng)))
    logits = model(text[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), text[:, 1:].reshape(-1))


def train_on_text(model, parameters, optimizer, scheduler, design, tables, rows: int, rng, steps: int, on_step):
    """``steps`` steps of the general text (next-token loss, gradients clipped at 1); ``on_step(step,
    loss)`` after each (logging, a divergence check)."""
    for step in range(steps):
        loss = text_batch_loss(model, design, tables, rows, rng)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        scheduler.step()
        on_step(step, loss)
