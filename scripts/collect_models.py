"""Every model's head geometry in one table (rule collect_models)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import pandas as pd

from headloc.io import log_to_file, read_json, write_table
from headloc.workflow.results import MODELS_FRAME_COLUMNS

log = log_to_file(snakemake.log[0])
frame = pd.DataFrame([read_json(path) for path in snakemake.input.models], columns=MODELS_FRAME_COLUMNS)
write_table(snakemake.output[0], frame)
log.info("%d models", len(frame))
