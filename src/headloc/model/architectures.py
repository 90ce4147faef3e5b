"""Which models headloc can ablate, decided from a config alone (no torch): the config check reads
it before any job (:func:`headloc.workflow.config.check_config`).

headloc gates each layer's attention output projection, found in the model's modules
(:func:`headloc.model.ablation.output_projections`). ``SUPPORTED_MODEL_TYPES`` are the
``model_type`` values for which that was checked against an independent computation on a tiny
random model (tests/integration/test_architectures.py builds every one of them): 91 with
transformers 5.23, up from the 10 of a hand-written list of module paths. Left out although a tiny
model passes: hybrids whose real checkpoints mix attention with other layers (lfm2, minimax), which
the two-layer test models do not show.
"""

from __future__ import annotations

SUPPORTED_MODEL_TYPES = frozenset({
    "afmoe", "apertus", "arcee", "aria_text", "beam", "biogpt", "bitnet", "bloom", "codegen", "cohere", "cohere2",
    "cohere2_moe", "cwm", "diffllama", "doge", "ernie4_5", "ernie4_5_moe", "exaone4", "exaone_moe", "falcon",
    "flex_olmo", "flint", "fuyu", "gemma", "gemma2", "gemma3_text", "gemma4_text", "gemma4_unified_text", "glm",
    "glm4", "glm4_moe", "gpt-sw3", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gpt_neox_japanese", "gpt_oss",
    "gptj", "granite", "granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared", "helium",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3", "hy_v4", "hyperclovax", "inkling2_text", "internlm3",
    "iquestcoder", "jais2", "kolibri1", "laguna", "llama", "llama4_text", "mellum", "minimax_m2",
    "minimax_m3_vl_text", "ministral", "ministral3", "mistral", "mixtral", "mpt", "nanochat", "nemotron", "olmo",
    "olmo2", "olmo3", "olmoe", "openai-gpt", "opt", "persimmon", "phi", "phi3", "phimoe", "qwen2", "qwen2_moe",
    "qwen3", "qwen3_moe", "seed_oss", "smollm3", "solar_open", "stablelm", "starcoder2", "trocr", "vaultgemma",
    "xglm", "zaya",
})

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
    elif model_type not in SUPPORTED_MODEL_TYPES:
        what = ("not an architecture whose attention output projections headloc has checked "
                "(docs/configuration.md, 'Models')")
    else:
        return None
    return f"model_type {model_type!r} is {what}; headloc ablates the heads of decoder-only models; {supported}"
