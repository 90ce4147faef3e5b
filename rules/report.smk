localrules:
    run_config,
    collect_models,
    collect_recoveries,
    collect_evals,
    collect_tuning,
    publish_collected,
    render_table,
    render_figure,
    plot_heatmap,


# Collected tables live under results/runs/<config digest>/ (see headloc.workflow.plan): a changed config
# collects into a new folder, so no table is ever rendered from another config's collection.


rule run_config:
    """The config this run folder's collected tables were made with (what its digest hashes)."""
    output:
        RUN_CONFIG,
    log:
        "results/logs/run_config/{}.log".format(PLAN.digest),
    conda:
        "../envs/headloc.yaml"
    params:
        config=config,
    script:
        "../scripts/run_config.py"


rule collect_models:
    """Every model's head geometry in one table (paper Table 1)."""
    input:
        run=RUN_CONFIG,
        models=expand(paths.GEOMETRY, model=MODELS),
    output:
        paths.COLLECTED.replace("{collection}", "models"),
    log:
        "results/logs/collect_models/{digest}.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/collect_models.py"


rule collect_recoveries:
    """Every search's recovered heads (universal heads filtered) in one table: the main method's
    searches (recoveries_main) or every method's (recoveries)."""
    input:
        run=RUN_CONFIG,
        recoveries=get_collected_recoveries,
        universal=universal_files,
    output:
        paths.COLLECTED,
    log:
        "results/logs/collect_recoveries/{digest}/{collection}.log",
    wildcard_constraints:
        collection=alternatives(collected.holding("recoveries")),
    conda:
        "../envs/headloc.yaml"
    params:
        selection=PLAN.selection_options(),
        collection=lambda wildcards: wildcards.collection,
        main_method=PLAN.main_method,
    script:
        "../scripts/collect_recoveries.py"


rule collect_evals:
    """The full-data evaluations behind one group of tables, one tidy row per (heads, k, task):
    main (the main method's top-k), methods (every method), universal, knowledge or all.
    """
    input:
        run=RUN_CONFIG,
        recoveries=get_collected_recoveries,
        universal=universal_files,
        evals=get_collected_evals,
    output:
        paths.COLLECTED,
    log:
        "results/logs/collect_evals/{digest}/{collection}.log",
    wildcard_constraints:
        collection=alternatives(collected.holding("evals")),
    conda:
        "../envs/headloc.yaml"
    params:
        selection=PLAN.selection_options(),
        collection=lambda wildcards: wildcards.collection,
        main_method=PLAN.main_method,
        units=PLAN.units(),  # percentage points, percent of the baseline or the metric's own unit
        directions=TASK_FACTS.directions(),  # each task's metric direction: every delta is oriented by it
    script:
        "../scripts/collect_evals.py"


rule collect_tuning:
    """Every tuning grid point (appendix A.1) in one table."""
    input:
        run=RUN_CONFIG,
        points=expand(paths.TUNING, model=MODELS, task=list(PLAN.tuning)),
    output:
        paths.COLLECTED.replace("{collection}", "tuning"),
    log:
        "results/logs/collect_tuning/{digest}.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/collect_tuning.py"


rule publish_collected:
    """A copy of this config's collected table where users look for it (results/tables/)."""
    input:
        lambda wildcards: PLAN.collected_path(wildcards.name),
    output:
        paths.PUBLISHED,
    log:
        "results/logs/publish_collected/{name}.log",
    wildcard_constraints:
        name=alternatives(collected.published()),
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/publish_collected.py"


# Snakemake's HTML report (snakemake --report report.html) shows what is marked report() below,
# with the captions in report/ (their Jinja context: snakemake.wildcards, snakemake.params, ...).


rule render_table:
    """Render one paper table as Markdown, CSV, LaTeX and HTML (the HTML is the report's view)."""
    input:
        unpack(lambda wildcards: report_inputs(TABLES[wildcards.table])),
    output:
        md=paths.TABLE.replace("{ext}", "md"),
        csv=paths.TABLE.replace("{ext}", "csv"),
        tex=paths.TABLE.replace("{ext}", "tex"),
        html=report(
            paths.TABLE.replace("{ext}", "html"),
            caption="../report/table.rst",
            category="Tables",
            labels=lambda w: {"table": w.table, "shows": TABLES[w.table].about},
        ),
    log:
        "results/logs/render_table/{table}.log",
    wildcard_constraints:
        table=alternatives(TABLES),
    conda:
        "../envs/headloc.yaml"
    params:
        options=PLAN.report_options(TASK_FACTS.directions()),
        about=lambda wildcards: TABLES[wildcards.table].about,
        deltas=lambda wildcards: TABLES[wildcards.table].deltas,
    script:
        "../scripts/render_table.py"


rule render_figure:
    """Render one paper figure as PNG and PDF (one this config cannot fill is refused: UNFILLED)."""
    input:
        unpack(figure_inputs),
    output:
        png=report(
            paths.FIGURE.replace("{ext}", "png"),
            caption="../report/figure.rst",
            category="Figures",
            labels=lambda w: {"figure": w.figure, "shows": FIGURES[w.figure].about},
        ),
        pdf=paths.FIGURE.replace("{ext}", "pdf"),
    log:
        "results/logs/render_figure/{figure}.log",
    wildcard_constraints:
        figure=alternatives(FIGURES),
    conda:
        "../envs/headloc.yaml"
    params:
        options=PLAN.report_options(TASK_FACTS.directions()),
        about=lambda wildcards: FIGURES[wildcards.figure].about,
    script:
        "../scripts/render_figure.py"


rule plot_heatmap:
    """One search's per-head effect as a layers x heads heatmap (headloc.report.heatmap)."""
    input:
        paths.RECOVERY,
    output:
        report(
            paths.HEATMAP,
            caption="../report/heatmap.rst",
            category="Heatmaps",
            subcategory="{task}",
            labels=lambda w: {
                "model": w.model,
                "method": search_method(w),
                "search": w.search,
            },
        ),
    log:
        "results/logs/plot_heatmap/{model}/{task}/{search}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        method=search_method,
        reading=lambda w: methods.get(search_method(w)).reading,  # the caption's how-to-read
    script:
        "../scripts/plot_heatmap.py"
