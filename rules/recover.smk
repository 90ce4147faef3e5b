checkpoint recover_heads:
    """Fit the Lasso of eq. (1) to one search's scores and rank the heads (a checkpoint: the
    validation jobs depend on which heads come out)."""
    input:
        masks="results/{model}/{task}/{search}/masks.npy",
        scores=get_chunk_scores,
    output:
        "results/{model}/{task}/{search}/recovery.json",
    log:
        "results/logs/recover_heads/{model}/{task}/{search}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
        method=search_method,
        alpha=SEARCH["alpha"],
        seed=SEARCH["seed"],
        top_k=TOP_K,
    script:
        "../scripts/recover_heads.py"
