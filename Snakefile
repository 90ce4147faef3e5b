"""headloc: compressed-sensing localization of capability heads (Bair et al., 2026).

snakemake --cores 2 --configfile config/demo.yaml      # embedded demo model, CPU
snakemake all --cores 1 --resources gpu=1               # the paper grid on a GPU box
snakemake results/tables/table2.md --cores 1 --resources gpu=1
"""

import os

from snakemake.utils import min_version

min_version("9.0")


# The paper grid is the default. A --configfile replaces it (Snakemake would otherwise merge the two,
# e.g. adding the paper's models to the demo's); --config alone edits it. Read from beside this
# Snakefile, so that `--directory` (or `-s` from another folder) finds it too.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "report/workflow.rst"  # snakemake --report report.html: captions in report/


include: "rules/common.smk"
include: "rules/report_inputs.smk"
include: "rules/resources.smk"
include: "rules/models.smk"
include: "rules/data.smk"
include: "rules/search.smk"
include: "rules/recover.smk"
include: "rules/validate.smk"
include: "rules/report.smk"
include: "rules/export.smk"


rule all:
    """Every table and figure of the configured run, and the tidy table of every evaluation."""
    default_target: True
    input:
        report_targets(),


rule heatmaps:
    """Every search's layers x heads heatmap of its per-head effects."""
    input:
        heatmap_files(),


# One target rule per paper table and figure: `snakemake table4` (or its file, e.g.
# results/tables/table4.md) runs only the jobs that table needs (headloc.workflow.plan says which).
for _name, _spec in TABLES.items():

    rule:
        name:
            _name
        input:
            table_files(_name),
        message:
            _spec.about


for _name, _spec in FIGURES.items():

    rule:
        name:
            _name
        input:
            figure_files(_name),
        message:
            _spec.about


# Last: every script rule above gets its code's digest as a param (rules/code.smk).
include: "rules/code.smk"
