"""Every search's reported heads in one table (rule collect_recoveries)."""

from headloc.io import log_to_file, read_json, write_table
from headloc.results import recoveries_frame, selections

log = log_to_file(snakemake.log[0])
recoveries = [read_json(path) for path in snakemake.input]
options = snakemake.params.selection
frame = recoveries_frame(recoveries, selections(recoveries, **options), options["capabilities"])
frame["top_heads"] = frame["top_heads"].str.join(",")
write_table(snakemake.output[0], frame)
log.info("%d searches", len(frame))
