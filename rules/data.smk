rule materialize_dataset:
    """Write a task's full documents to JSONL (a built-in dataset, or a copy of the task's own file),
    every document checked for the fields its task reads."""
    input:
        data_file=get_data_file,
        task=get_task_files,
    output:
        "results/data/{task}/test.jsonl",
    log:
        "results/logs/materialize_dataset/{task}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        options=dataset_options,
    script:
        "../scripts/materialize_dataset.py"


rule subset_dataset:
    """Draw the seeded identification subset the masks are scored on (paper: 100 documents)."""
    input:
        "results/data/{task}/test.jsonl",
    output:
        "results/data/{task}/id_{n}_seed{seed}.jsonl",
    log:
        "results/logs/subset_dataset/{task}/id_{n}_seed{seed}.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/subset_dataset.py"
