"""headloc: compressed-sensing localization of capability heads (Bair et al., 2026).

snakemake --cores 2 --configfile config/demo.yaml      # embedded demo model, CPU
snakemake all --cores 1 --resources gpu=1               # the paper grid on a GPU box
snakemake results/tables/table2.md --cores 1 --resources gpu=1
"""

from snakemake.utils import min_version

min_version("9.0")


# The paper grid is the default; a --configfile replaces it (Snakemake would otherwise merge the
# two, e.g. adding the paper's models to the demo's).
if not config:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/data.smk"
include: "rules/search.smk"
include: "rules/recover.smk"
include: "rules/validate.smk"
include: "rules/report.smk"


rule all:
    """Every table and figure of the configured run."""
    default_target: True
    input:
        report_targets(),


rule table2:
    """Delta Task and Delta Gen of the top-k heads per task (paper Table 2)."""
    input:
        table_files("table2"),


rule table6:
    """Degradation against the number of heads ablated (paper Table 6)."""
    input:
        table_files("table6"),


rule table10:
    """Recovered heads per task (paper Table 10)."""
    input:
        table_files("table10"),


rule fig2:
    """Degradation against the number of heads ablated, as a plot (paper Figure 2)."""
    input:
        figure_files("fig2"),
