"""Every tuning grid point in one table (rule collect_tuning)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import pandas as pd

from headloc.io import log_to_file, read_json, write_table
from headloc.workflow.results import TUNING_FRAME_COLUMNS

log = log_to_file(snakemake.log[0])
rows = [point for path in snakemake.input.points for point in read_json(path)["points"]]
frame = pd.DataFrame(rows, columns=TUNING_FRAME_COLUMNS)
frame["top_heads"] = frame["top_heads"].str.join(",")
write_table(snakemake.output[0], frame)
log.info("%d grid points", len(frame))
