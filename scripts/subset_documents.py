"""Draw the seeded identification subset of a task's own documents, as indices (rule subset_documents)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.data.datasets import identification_subset
from headloc.io import log_to_file, read_json, write_json

log = log_to_file(snakemake.log[0])
documents = read_json(snakemake.input[0])
n, seed = int(snakemake.wildcards.n), int(snakemake.wildcards.seed)
try:
    chosen = identification_subset(documents["doc_ids"], n, seed)
except ValueError as error:  # name the task: the message alone does not say which one
    raise ValueError(f"{snakemake.input[0]} (task {snakemake.wildcards.task}): {error}; lower "
                     f"tasks.{snakemake.wildcards.task}.id_docs or search.id_docs") from None
log.info("kept %d of %d documents (seed %d): %s", len(chosen), len(documents["doc_ids"]), seed, chosen)
write_json(snakemake.output[0], {"task": documents["task"], "seed": seed, "doc_ids": chosen})
