rule materialize_dataset:
    """Write a task's full documents to JSONL (a built-in dataset, or a copy of the task's own file),
    every document checked for the fields its task reads."""
    output:
        "results/data/{task}/test.jsonl",
    log:
        "results/logs/materialize_dataset/{task}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        task_digest=task_digest,  # the content of its files, not their paths
        options=dataset_options,
        data_file=data_file_digest,
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


rule count_documents:
    """Record the evaluation documents of a task that reads its own data (dataset_path: the hub,
    json, csv, ...): how many there are, and the indices the full-data validation scores.
    """
    output:
        "results/data/{task}/documents.json",
    log:
        "results/logs/count_documents/{task}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        task_digest=task_digest,  # the content of its files, not their paths
        task=validation_task_options,
        n_docs=task_n_docs,
    script:
        "../scripts/count_documents.py"


rule subset_documents:
    """Draw the seeded identification subset of a task that reads its own data, as document indices."""
    input:
        "results/data/{task}/documents.json",
    output:
        "results/data/{task}/id_{n}_seed{seed}.json",
    log:
        "results/logs/subset_documents/{task}/id_{n}_seed{seed}.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/subset_documents.py"
