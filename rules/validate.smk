rule validate_headset:
    """Evaluate every task on its full data with one head set ablated ('none' = the baseline):
    one model load for all tasks, one result file per task."""
    input:
        model=get_model_input,
        docs=[full_documents(task) for task in TASKS],
        tasks=get_all_task_files,
    output:
        expand("results/{{model}}/evals/{task}/{{headset}}.json", task=TASKS),
    log:
        "results/logs/validate_headset/{model}/{headset}.log",
    benchmark:
        "results/benchmarks/validate_headset/{model}/{headset}.tsv"
    conda:
        "../envs/headloc.yaml"
    threads: 1
    resources:
        gpu=1,
        mem_mb=eval_mem_mb,
        runtime=eval_runtime,
    params:
        location=model_location,
        model=model_options,
        names=TASKS,
        tasks=all_task_options,
        include_path=INCLUDE_PATH,
    script:
        "../scripts/validate_headset.py"
