rule materialize_dataset:
    """Write a task's full documents to JSONL (a built-in dataset, or a copy of the task's own file),
    every document checked for the fields its task reads."""
    output:
        paths.DOCUMENTS,
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
        paths.DOCUMENTS,
    output:
        paths.ID_SUBSET.replace("{ext}", "jsonl"),
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
        paths.DOCUMENT_INDICES,
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
        paths.DOCUMENT_INDICES,
    output:
        paths.ID_SUBSET.replace("{ext}", "json"),
    log:
        "results/logs/subset_documents/{task}/id_{n}_seed{seed}.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/subset_documents.py"
