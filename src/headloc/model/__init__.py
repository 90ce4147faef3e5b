"""Models: resolving a source to something transformers loads (``loading``: hub ids, local
folders, GGUF files, the embedded SmolLM2; ``gguf_header``: a GGUF file's metadata, and whether it
is whole), a model's head geometry from its config alone (``geometry``), and zeroing attention heads
in a loaded model (``ablation``: forward pre-hooks on the attention output projection, found in the
model's modules by ``projections``) and which architectures that was checked on (``architectures``,
read by the config check without torch)."""
