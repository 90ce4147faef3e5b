rule validate_headset:
    """Evaluate every task on its full data with one head set ablated ('none' = the baseline):
    one model load for all tasks, one result file per task; a head set that rule
    single_head_damage evaluated on every task (the baseline, a head alone, a step of a filtered
    top k) is copied from its records."""
    input:
        model=get_model_input,
        docs=[TASK_FACTS.full_documents(task) for task in TASKS],
        measured=measured_evals,
    output:
        expand(paths.EVAL, task=TASKS, allow_missing=True),
    log:
        "results/logs/validate_headset/{model}/{headset}.log",
    benchmark:
        "results/benchmarks/validate_headset/{model}/{headset}.tsv"
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(),
        names=TASKS,
        tasks=all_task_options,
        task_digests=all_task_digests,
    script:
        "../scripts/validate_headset.py"
