"""Tiny random decoders of every architecture headloc ablates, and an ablation's independent
reference (tests/integration/test_architectures.py; tools/ can list what else transformers builds).

A model is built from its model_type alone: ``transformers.CONFIG_MAPPING[model_type]`` with the tiny
sizes of TINY (each config reads the spellings it knows: hidden_size or n_embd, ...), randomly
initialised by ``AutoModelForCausalLM.from_config``, eager attention.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

VOCAB = 101
TINY = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, max_position_embeddings=128, head_dim=8, n_embd=32, n_layer=2, n_head=4,
            n_positions=128, d_model=32, n_layers=2, n_heads=4, num_layers=2, num_heads=4, ffn_dim=48, d_ff=48,
            pad_token_id=0, bos_token_id=1, eos_token_id=2,
            # mixtures of experts: few small experts (the defaults, 60 and more, take seconds to build)
            num_experts=4, num_local_experts=4, n_routed_experts=4, moe_intermediate_size=16, num_experts_per_tok=2,
            rotary_dim=4,  # GPT-J, CodeGen: rotary dimensions within a head of 8
            vocab_size_per_layer_input=VOCAB, hidden_size_per_layer_input=8)  # Gemma 3n/4: per-layer embeddings  # GPT-J, CodeGen: rotary dimensions within a head of 8
# What a config spells differently or refuses among TINY's keys.
OVERRIDES = {
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]]),
    "zaya": dict(num_experts_per_tok=1),
    "deepseek_v2": dict(q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8),
    "deepseek_v3": dict(q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
                        first_k_dense_replace=1, n_group=1, topk_group=1),
    "minicpm3": dict(q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8),
}
DROPPED = {"falcon": ("head_dim",), "dbrx": ("num_experts",)}


def tiny_decoder(model_type: str, seed: int = 0):
    """A tiny random causal LM of ``model_type``, eager attention, in eval mode."""
    import transformers

    options = {**TINY, **OVERRIDES.get(model_type, {})}
    for key in DROPPED.get(model_type, ()):
        options.pop(key)
    config = transformers.CONFIG_MAPPING[model_type](**options)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()


def zeroed_columns(model, projections: list[str], mask, n_heads: int):
    """A copy of ``model`` whose output projections (``projections``, one path per layer) ignore the
    ablated heads' (``mask``, flat over layers x heads, 1 = ablated) input columns."""
    reference = copy.deepcopy(model)
    for index in np.flatnonzero(mask):
        layer, head = divmod(int(index), n_heads)
        weight = reference.get_submodule(projections[layer]).weight.data
        conv1d = type(reference.get_submodule(projections[layer])).__name__ == "Conv1D"  # (in, out)
        width = (weight.shape[0] if conv1d else weight.shape[1]) // n_heads
        cols = slice(head * width, (head + 1) * width)
        if conv1d:
            weight[cols, :] = 0
        else:
            weight[:, cols] = 0
    return reference


def attention_replaced_by_bias(model, attention: str, projection: str):
    """A context in which the attention module at path ``attention`` returns what its output
    projection gives for an all-zero input (its bias, or zeros): every head of that layer removed,
    computed without the gate and without knowing the heads' layout."""
    module, proj = model.get_submodule(attention), model.get_submodule(projection)

    def hook(_module, _args, output):
        several = isinstance(output, (tuple, list))  # (output, weights, ...): GPT-1 returns a list
        first = output[0] if several else output
        bias = getattr(proj, "bias", None)
        replaced = torch.zeros_like(first) + (bias if bias is not None else 0)
        return type(output)([replaced, *output[1:]]) if several else replaced

    return module.register_forward_hook(hook)
