# Input functions of the collected tables, the tables, the figures and `all` (rules/report.smk and
# the Snakefile's target rules); the plan, models and tasks they read are rules/common.smk's.


# ---------------------------------------------------------------- collected tables


def get_collected_recoveries(wildcards):
    return [
        recovery_file(model, task, search)
        for model in MODELS
        for task, search in PLAN.searches_of(wildcards.collection)
    ]


def ranking(model, task, search):
    """Recovered ranking of a finished search (waits for the recover_heads checkpoint)."""
    found = checkpoints.recover_heads.get(model=model, task=task, search=search)
    with open(found.output[0]) as handle:
        return json.load(handle)["ranking"]


def get_collected_evals(wildcards):
    """The evaluation files one collected evals table needs: for each model, every task with each
    head set the collection's searches select (after their recover_heads checkpoints).
    """
    files = []
    for model in MODELS:
        rankings = {
            (task, search): ranking(model, task, search)
            for task, search in PLAN.searches_of(wildcards.collection)
        }
        universal = found_universal(model) if rankings else None
        headsets = PLAN.headsets(wildcards.collection, rankings, model, universal)
        files += expand(paths.EVAL, model=model, task=TASKS, headset=headsets)
    return files


# ---------------------------------------------------------------- tables, figures and all


def table_files(tables):
    return expand(paths.TABLE, table=tables, ext=["md", "csv", "tex"])


def figure_files(figures):
    return expand(paths.FIGURE, figure=figures, ext=["png", "pdf"])


def report_inputs(spec):
    """The collected tables one table or figure reads, named as its builder expects."""
    return {name: PLAN.collected_path(name) for name in spec.inputs}


# The figures this config cannot fill (no knowledge tasks, one search method), each with why:
# `all` leaves them out and asking for one by name stops before any job, saying what is missing.
UNFILLED = {
    name: why
    for name, spec in FIGURES.items()
    if (why := spec.unfilled(ReportOptions(**PLAN.report_options())))
}


def figure_inputs(wildcards):
    """The collected tables a figure reads; an error naming what the config lacks for an unfilled one."""
    if wildcards.figure in UNFILLED:
        raise WorkflowError(
            f"figure {wildcards.figure} is not drawn for this config: {UNFILLED[wildcards.figure]}. "
            "`all` leaves it out (docs/targets.md)."
        )
    return report_inputs(FIGURES[wildcards.figure])


def heatmap_files():
    """Every search's layers x heads heatmap (target `heatmaps`)."""
    return [
        paths.HEATMAP.format(model=model, task=task, search=search)
        for model in MODELS
        for task in PLAN.searches
        for search in PLAN.searches[task]
    ]


def report_targets():
    tables = [name for name in TABLES if name != "tuning" or PLAN.tuning]
    universal = expand(paths.UNIVERSAL, model=MODELS) if LOCALIZED else []
    published = expand(paths.PUBLISHED, name=collected.published())
    return (
        table_files(tables)
        + figure_files([name for name in FIGURES if name not in UNFILLED])
        + published
        + universal
        + heatmap_files()
    )
