"""Every search's per-head values in formats other tools read (headloc.report.export, docs/library.md):
`snakemake export` writes results/exports/heads.csv (tidy: one row per search and head) and
results/exports/mib/<search>/<task>_<model>/importances.json (MIB's node format), from the
recoveries the run has or makes."""


localrules:
    export,


rule export:
    """Every search's per-head values as one tidy CSV and as MIB node-level importance files."""
    input:
        recoveries=[
            paths.RECOVERY.format(model=model, task=task, search=search)
            for model in MODELS
            for task in PLAN.searches
            for search in PLAN.searches[task]
        ],
    output:
        csv=paths.EXPORT_CSV,
        mib=directory(paths.EXPORT_MIB),
    log:
        "results/logs/export/export.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/export_heads.py"
