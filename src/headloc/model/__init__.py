"""Models: resolving a source to something transformers loads (``loading``: hub ids, local
folders, GGUF files, the embedded SmolLM2; a model's head geometry from its config alone), and
zeroing attention heads in a loaded model (``ablation``: forward pre-hooks on the attention output
projection, ``HOOK_MODULES`` per architecture)."""
