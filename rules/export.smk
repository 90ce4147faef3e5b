"""Every search's per-head values for other tools (headloc.report.export, docs/library.md):
`snakemake export` writes results/exports/heads.csv (tidy: one row per search and head) and one MIB
circuit-track submission, results/exports/mib/<task>_<model>/importances.json (the export method's
search of each task: export.mib.method, else validation.method) with results/exports/mib/headloc.tsv,
from the recoveries the run has or makes."""


localrules:
    export,


rule export:
    """Every search's per-head values as one tidy CSV, and one MIB submission of the export method's searches."""
    input:
        recoveries=[
            paths.RECOVERY.format(model=model, task=task, search=search)
            for model in MODELS
            for task in PLAN.searches
            for search in PLAN.searches[task]
        ],
        models=[path for model in MODELS for path in MODEL_FACTS.prepared(model)],
        # the universal heads the tables filter: the export ranks them after the others
        universal=(
            expand(paths.UNIVERSAL, model=MODELS)
            if LOCALIZED and PLAN.universal_filter
            else []
        ),
    output:
        csv=paths.EXPORT_CSV,
        mib=directory(paths.EXPORT_MIB),
    log:
        "results/logs/export/export.log",
    conda:
        "../envs/headloc.yaml"
    params:
        # the MIB submission: (task, search id) of each task's export search, MIB's names, and
        # where each model's config is read (its graph config: hidden size, parallel blocks)
        mib_searches=[list(pair) for pair in PLAN.export_searches()],
        mib_names=config.get("export", {}).get("mib", {}),
        locations={model: MODEL_FACTS.location(model) for model in MODELS},
    script:
        "../scripts/export_heads.py"
