"""The evaluations behind one group of tables, as tidy rows (rule collect_evals)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, read_json, write_table
from headloc.workflow.plan_tables import collection_selections
from headloc.workflow.selection import with_universal
from headloc.workflow.results import evals_frame

log = log_to_file(snakemake.log[0])
recoveries = [read_json(path) for path in snakemake.input.recoveries]
evals = [read_json(path) for path in snakemake.input.evals]
p = snakemake.params
# the universal heads each model's rule universal_heads found (detected or given)
options = with_universal(p.selection, {u["model"]: u["heads"] for u in map(read_json, snakemake.input.universal)})
chosen = collection_selections(p.collection, recoveries, options, p.main_method)
frame = evals_frame(chosen, evals, units=p.units, capabilities=options["capabilities"], directions=p.directions)
write_table(snakemake.output[0], frame)
log.info("%s: %d selections, %d rows from %d evaluations", p.collection, len(chosen), len(frame),
         len(evals))
