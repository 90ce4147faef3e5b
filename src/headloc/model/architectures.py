"""Which models headloc can ablate, decided from a config alone (no torch): the config check reads
it before any job (:func:`headloc.workflow.config.check_config`).

headloc gates each layer's attention output projection, found in the model's modules
(:func:`headloc.model.projections.output_projections`), whose input must hold num_attention_heads heads
in every layer (checked layer by layer when a model is loaded). ``SUPPORTED_MODEL_TYPES`` are the
``model_type`` values for which that was checked against an independent computation on a tiny
random model (tests/integration/test_architectures.py builds every one of them): 89 with
transformers 5.23, up from the 10 of a hand-written list of module paths. Left out although a tiny
model passes: hybrids whose real checkpoints mix attention with other layers (lfm2, minimax), which
the two-layer test models do not show, and the model types of :data:`REFUSED`, whose heads are not
the slices headloc gates.

Where the gate sits is the projection's input, which for most architectures is the heads' outputs
concatenated. BitNet normalises that concatenation first (``attn_sub_norm``, an RMSNorm over all
heads, then ``o_proj``), so its gate zeroes a head's *normalised* output: the other heads keep the
scale the removed head gave them, where zeroing the head's output before the norm would rescale
them. On the tests' tiny random BitNet (2 layers x 4 heads, seeds 0-2) the two differ by 0.02-0.08
in the largest logit, against an effect of the single-head ablation of 0.11-0.39 (9-39 % of it).
"""

from __future__ import annotations

SUPPORTED_MODEL_TYPES = frozenset({
    "afmoe", "apertus", "arcee", "aria_text", "beam", "biogpt", "bitnet", "bloom", "codegen", "cohere", "cohere2",
    "cohere2_moe", "cwm", "doge", "ernie4_5", "ernie4_5_moe", "exaone4", "exaone_moe", "falcon",
    "flex_olmo", "flint", "fuyu", "gemma", "gemma2", "gemma3_text", "gemma4_text", "gemma4_unified_text", "glm",
    "glm4", "glm4_moe", "gpt-sw3", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gpt_neox_japanese", "gpt_oss",
    "gptj", "granite", "granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared", "helium",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3", "hy_v4", "hyperclovax", "internlm3",
    "iquestcoder", "jais2", "kolibri1", "laguna", "llama", "llama4_text", "mellum", "minimax_m2",
    "minimax_m3_vl_text", "ministral", "ministral3", "mistral", "mixtral", "mpt", "nanochat", "nemotron", "olmo",
    "olmo2", "olmo3", "olmoe", "openai-gpt", "opt", "persimmon", "phi", "phi3", "phimoe", "qwen2", "qwen2_moe",
    "qwen3", "qwen3_moe", "seed_oss", "smollm3", "solar_open", "stablelm", "starcoder2", "trocr", "vaultgemma",
    "xglm", "zaya",
})

# Model types whose attention output projection a tiny model finds, but whose heads are not the
# num_attention_heads slices of its input that headloc gates: refused at parse and when loaded, with
# the reason. Making them exact needs a head geometry other than layers x num_attention_heads.
REFUSED = {
    "diffllama": ("its attention is differential: o_proj reads num_attention_heads / 2 heads of width 2 x head_dim, "
                  "each the difference of two query heads' attention normalised together (groupnorm), so a gate "
                  "on one of num_attention_heads slices is half a differential head and matches no head's "
                  "ablation"),
    "inkling2_text": ("its sliding-window layers build their heads from swa_num_attention_heads and swa_head_dim "
                      "(48 and 128 by default), the full layers from num_attention_heads and head_dim, where "
                      "headloc's masks count num_attention_heads heads in every layer: one headloc head would be "
                      "several real ones, or part of one"),
}

# Encoders (bidirectional attention: no causal language model to ablate), by model_type, for a
# clearer refusal than "not supported".
ENCODERS = frozenset({
    "albert", "bert", "bert-generation", "big_bird", "camembert", "convbert", "data2vec-text", "deberta",
    "deberta-v2", "distilbert", "electra", "ernie", "esm", "flaubert", "ibert", "layoutlm", "longformer", "luke",
    "megatron-bert", "mobilebert", "modernbert", "mpnet", "nystromformer", "rembert", "roberta",
    "roberta-prelayernorm", "roc_bert", "roformer", "squeezebert", "xlm", "xlm-roberta", "xlm-roberta-xl", "xmod",
    "yoso",
})


def ablation_problem(config: dict) -> str | None:
    """Why headloc cannot ablate the heads of the model a ``config.json`` (as a dict) describes, or
    None when it can.

    >>> ablation_problem({"model_type": "llama"}) is None
    True
    >>> ablation_problem({"model_type": "bert"}).split(";")[0]
    "model_type 'bert' is an encoder (bidirectional attention), not a causal decoder"
    """
    model_type = config.get("model_type")
    supported = f"supported model types: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}"
    if not isinstance(model_type, str):
        return f"its config.json names no model_type; {supported}"
    if model_type in ENCODERS:
        what = "an encoder (bidirectional attention), not a causal decoder"
    elif config.get("is_encoder_decoder"):
        what = "an encoder-decoder, not a decoder-only model"
    elif model_type in REFUSED:
        what = f"refused: {REFUSED[model_type]}"
    elif model_type not in SUPPORTED_MODEL_TYPES:
        what = ("not an architecture whose attention output projections headloc has checked "
                "(docs/configuration.md, 'Your own model')")
    else:
        return None
    return f"model_type {model_type!r} is {what}; headloc ablates the heads of decoder-only models; {supported}"
