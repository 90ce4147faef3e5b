"""Draw the seeded identification subset (rule subset_dataset)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.data.datasets import identification_subset, read_jsonl, write_jsonl
from headloc.io import log_to_file

log = log_to_file(snakemake.log[0])
docs = read_jsonl(snakemake.input[0])
n, seed = int(snakemake.wildcards.n), int(snakemake.wildcards.seed)
try:
    subset = identification_subset(docs, n, seed)
except ValueError as error:  # name the file: the message alone does not say which dataset
    raise ValueError(f"{snakemake.input[0]} (task {snakemake.wildcards.task}): {error}; lower "
                     f"tasks.{snakemake.wildcards.task}.id_docs or search.id_docs") from None
log.info("kept %d of %d documents (seed %d)", len(subset), len(docs), seed)
write_jsonl(subset, snakemake.output[0])
