"""Gather recoveries and validations into tidy tables (rule collect_results)."""

from headloc.io import log_to_file, read_json, write_table
from headloc.results import evals_frame, recoveries_frame

log = log_to_file(snakemake.log[0])
recoveries = [read_json(path) for path in snakemake.input.recoveries]
evals = [read_json(path) for path in snakemake.input.evals]
frame = evals_frame(recoveries, evals, relative_tasks=snakemake.params.relative)
table = recoveries_frame(recoveries)
table["top_heads"] = table["top_heads"].str.join(",")
write_table(snakemake.output.evals, frame)
write_table(snakemake.output.recoveries, table)
log.info("%d searches, %d evaluation rows", len(table), len(frame))
