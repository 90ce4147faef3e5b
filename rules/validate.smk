rule validate_headset:
    """Evaluate one task on its full data with one head set ablated ('none' = the baseline)."""
    input:
        model=get_model_input,
        docs="results/data/{task}/test.jsonl",
    output:
        "results/{model}/evals/{task}/{headset}.json",
    log:
        "results/logs/validate_headset/{model}/{task}/{headset}.log",
    benchmark:
        "results/benchmarks/validate_headset/{model}/{task}/{headset}.tsv"
    conda:
        "../envs/headloc.yaml"
    threads: 1
    resources:
        gpu=1,
    params:
        location=model_location,
        model=model_options,
        task=task_options,
    script:
        "../scripts/validate_headset.py"
