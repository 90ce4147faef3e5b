localrules:
    collect_results,
    render_table,
    render_figure,


rule collect_results:
    """Gather every recovery and validation into two tidy tables the paper's tables are cut from."""
    input:
        recoveries=recovery_files(),
        evals=get_all_evals,
    output:
        evals="results/tables/evals.tsv",
        recoveries="results/tables/recoveries.tsv",
    log:
        "results/logs/collect_results/all.log",
    conda:
        "../envs/headloc.yaml"
    params:
        relative=[task for task in TASKS if config["tasks"][task]["relative"]],
    script:
        "../scripts/collect_results.py"


rule render_table:
    """Render one paper table as Markdown, CSV and LaTeX."""
    input:
        evals="results/tables/evals.tsv",
        recoveries="results/tables/recoveries.tsv",
    output:
        md="results/tables/{table}.md",
        csv="results/tables/{table}.csv",
        tex="results/tables/{table}.tex",
    log:
        "results/logs/render_table/{table}.log",
    wildcard_constraints:
        table=alternatives(TABLES),
    conda:
        "../envs/headloc.yaml"
    params:
        top_k=TOP_K,
        gen_tasks=GEN_TASKS,
    script:
        "../scripts/render_table.py"


rule render_figure:
    """Render one paper figure as PNG and PDF."""
    input:
        evals="results/tables/evals.tsv",
    output:
        png="results/figures/{figure}.png",
        pdf="results/figures/{figure}.pdf",
    log:
        "results/logs/render_figure/{figure}.log",
    wildcard_constraints:
        figure=alternatives(FIGURES),
    conda:
        "../envs/headloc.yaml"
    params:
        gen_tasks=GEN_TASKS,
    script:
        "../scripts/render_figure.py"
