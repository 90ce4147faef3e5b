"""Write every search's per-head values as a tidy CSV, and the export searches as one MIB
submission (rule export). Snakemake removes the submission folder (a directory output) before the
job, so a search that left the config leaves no stale folder behind."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, read_json
from headloc.model.loading import load_config
from headloc.report.export import MIB_FORMAT, mib_cfg, write_submission, write_tidy

log = log_to_file(snakemake.log[0])
records = [read_json(path) for path in snakemake.input.recoveries]
write_tidy(snakemake.output.csv, records)
wanted = {tuple(pair) for pair in snakemake.params.mib_searches}
submitted = [record for record in records if (record["task"], record["search"]) in wanted]
cfgs = {model: mib_cfg(load_config(location)) for model, location in snakemake.params.locations.items()}
names = snakemake.params.mib_names
# with the universal filter on, the universal heads rank after the others, as Table 2 validates them
universal = {record["model"]: record["heads"] for record in map(read_json, snakemake.input.universal)}
written = write_submission(snakemake.output.mib, submitted, cfgs, tasks=names.get("tasks"), models=names.get("models"),
                           universal=universal, log=log)
log.info("%d searches: %s; %d in the MIB submission (%s) under %s", len(records), snakemake.output.csv,
         len(written), MIB_FORMAT, snakemake.output.mib)
