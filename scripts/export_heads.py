"""Write every search's per-head values as a tidy CSV and MIB node files (rule export).

The MIB folder is rebuilt whole: a search that left the config leaves no stale file behind.
"""

import shutil

from headloc.io import log_to_file, read_json
from headloc.report.export import MIB_FORMAT, write_mib, write_tidy

log = log_to_file(snakemake.log[0])
records = [read_json(path) for path in snakemake.input.recoveries]
write_tidy(snakemake.output.csv, records)
shutil.rmtree(snakemake.output.mib, ignore_errors=True)
written = write_mib(snakemake.output.mib, records)
log.info("%d searches: %s and %d MIB files (%s) under %s", len(records), snakemake.output.csv, len(written),
         MIB_FORMAT, snakemake.output.mib)
