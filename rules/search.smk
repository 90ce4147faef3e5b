rule make_masks:
    """Build the measurement matrix Phi (M x N, 1 = ablated) of one search."""
    input:
        model=get_model_input,
    output:
        "results/{model}/{task}/{search}/masks.npy",
    log:
        "results/logs/make_masks/{model}/{task}/{search}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
        method=search_method,
        n_masks=SEARCH["n_masks"],
        sparsity=SEARCH["sparsity"],
        seed=SEARCH["seed"],
    script:
        "../scripts/make_masks.py"


rule score_masks:
    """Score one chunk of masks on the identification subset: one model load for many masks."""
    input:
        model=get_model_input,
        masks="results/{model}/{task}/{search}/masks.npy",
        docs=get_id_subset,
    output:
        scores="results/{model}/{task}/{search}/scores/{chunk}.tsv",
        samples="results/{model}/{task}/{search}/scores/{chunk}.samples.jsonl",
    log:
        "results/logs/score_masks/{model}/{task}/{search}/{chunk}.log",
    benchmark:
        "results/benchmarks/score_masks/{model}/{task}/{search}/{chunk}.tsv"
    conda:
        "../envs/headloc.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        location=model_location,
        model=model_options,
        task=task_options,
        chunks=SEARCH["chunks"],
    script:
        "../scripts/score_masks.py"
