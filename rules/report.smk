localrules:
    collect_models,
    collect_recoveries,
    collect_evals,
    collect_tuning,
    render_table,
    render_figure,


rule collect_models:
    """Every model's head geometry in one table (paper Table 1)."""
    input:
        expand("results/{model}/geometry.json", model=MODELS),
    output:
        COLLECTED["models"],
    log:
        "results/logs/collect_models/all.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/collect_models.py"


rule collect_recoveries:
    """Every search's recovered heads (universal heads filtered) in one table."""
    input:
        all_recovery_files(),
    output:
        COLLECTED["recoveries"],
    log:
        "results/logs/collect_recoveries/all.log",
    conda:
        "../envs/headloc.yaml"
    params:
        selection=lambda wildcards: selection_params(),
    script:
        "../scripts/collect_recoveries.py"


rule collect_evals:
    """The full-data evaluations behind one group of tables, one tidy row per (heads, k, task):
    main (the main method's top-k), methods (every method), universal, knowledge or all.
    """
    input:
        recoveries=all_recovery_files(),
        evals=get_scope_evals,
    output:
        "results/tables/evals_{scope}.tsv",
    log:
        "results/logs/collect_evals/{scope}.log",
    wildcard_constraints:
        scope=alternatives(EVAL_SCOPES),
    conda:
        "../envs/headloc.yaml"
    params:
        selection=lambda wildcards: selection_params(),
        scope=lambda wildcards: EVAL_SCOPES[wildcards.scope],
        relative=[task for task in TASKS if config["tasks"][task]["relative"]],
    script:
        "../scripts/collect_evals.py"


rule collect_tuning:
    """Every tuning grid point (appendix A.1) in one table."""
    input:
        tuning_files(),
    output:
        COLLECTED["tuning"],
    log:
        "results/logs/collect_tuning/all.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/collect_tuning.py"


rule render_table:
    """Render one paper table as Markdown, CSV and LaTeX."""
    input:
        unpack(table_inputs),
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
        **report_params(),
    script:
        "../scripts/render_table.py"


rule render_figure:
    """Render one paper figure as PNG and PDF."""
    input:
        unpack(figure_inputs),
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
        **report_params(),
    script:
        "../scripts/render_figure.py"
