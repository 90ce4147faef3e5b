"""The evaluations behind one group of tables, as tidy rows (rule collect_evals)."""

from headloc.io import log_to_file, read_json, write_table
from headloc.results import evals_frame, selections

log = log_to_file(snakemake.log[0])
recoveries = [read_json(path) for path in snakemake.input.recoveries]
evals = [read_json(path) for path in snakemake.input.evals]
options, scope = snakemake.params.selection, snakemake.params.scope
chosen = [s for s in selections(recoveries, **options)
          if s["kind"] in scope["kinds"] and (scope["methods"] is None or s["kind"] != "task"
                                              or s["method"] in scope["methods"])]
frame = evals_frame(chosen, evals, relative_tasks=snakemake.params.relative,
                    capabilities=options["capabilities"])
write_table(snakemake.output[0], frame)
log.info("%s: %d selections, %d rows from %d evaluations", snakemake.wildcards.scope, len(chosen),
         len(frame), len(evals))
