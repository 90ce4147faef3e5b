"""headloc: which attention heads carry a capability, found by ablating heads and scoring the
damaged model through lm-eval tasks (Bair et al., 2026, "Compressed Sensing for Capability
Localization in Large Language Models").

The package is layered; each part imports only the parts listed before it (tests/unit/
test_layout.py checks this and that there is no import circle):

``heads``, ``io``, ``collected``
    The vocabulary every part shares: head names (``L3H7``), head sets, head geometry; atomic
    writes of JSON, tables and arrays; the registry of collected tables (their names, what each
    holds and makes the workflow run, which are published).
``model``
    Loading a model from any source (hub id, local folder, GGUF, the embedded SmolLM2) and zeroing
    attention heads in it (``model.ablation.ablate_heads``).
``data``
    The documents a task scores: headloc's built-in datasets, the paper's data mirror, a task's own
    documents, and the sandbox for model-written programs. The lm-eval task YAMLs are the folder
    ``headloc/tasks`` (``data.TASKS_DIR``).
``engine``
    The seam with lm-eval: scoring a task with heads ablated (``engine.evaluation.MaskEvaluator``),
    many masks per forward pass (``engine.grouped``), gold continuations for gradients
    (``engine.supervision``).
``search``
    The algorithms, free of any workflow: mask designs, the Lasso of eq. (1), two-stage designs,
    greedy rounds, attribution patching, Causal Head Gating.
``methods``
    The registry of search methods, one module each: what the workflow and the report need to know
    of a method, and the glue from its rule's inputs to its algorithm.
``report``
    The paper's tables and figures from collected results, their formats, the heatmaps and the
    efficiency summaries. It draws what it is handed and never imports the workflow.
``workflow``
    What the Snakemake workflow asks, without Snakemake: config checks, the plan, every results
    path, model and task facts, the jobs' memory and time, head selection, finished results,
    portable caching.
``groundtruth``
    Planted-head models whose capability heads are known (docs/ground-truth.md): their recipe,
    tasks, training and measured truth.
``api``
    The front door for a model already loaded: ``headloc.locate(model, tokenizer, task)`` runs
    any registered search the way the workflow does and returns its ranking, heatmap, validation
    and exports; ``python -m headloc locate`` is the same from a shell.
``benchmarks``
    The logic of the repository's benchmarks/ scripts (the GPU check, methods against greedy on
    SmolLM2, the landscape beside a background), which run ``locate`` as a user would.
"""

__all__ = ["locate"]


def __getattr__(name):
    """``headloc.locate`` without importing torch and lm-eval for ``import headloc`` (the Snakefile
    reads the method registry at parse time)."""
    if name == "locate":  # imported by name: the package itself is no layer (tests/unit/test_layout.py)
        import importlib

        return importlib.import_module("headloc.api").locate
    raise AttributeError(f"module 'headloc' has no attribute {name!r}")

