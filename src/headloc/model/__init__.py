"""Models: resolving a source to something transformers loads (``loading``: hub ids, local
folders, GGUF files, the embedded SmolLM2; a model's head geometry from its config alone), and
zeroing attention heads in a loaded model (``ablation``: forward pre-hooks on the attention output
projection, found in the model's modules) and which architectures that was checked on
(``architectures``, read by the config check without torch)."""
