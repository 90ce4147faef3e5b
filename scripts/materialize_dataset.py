"""Write a task's full documents to JSONL (rule materialize_dataset).

Every kept document is checked for the fields its task's templates read before anything is
written, so a bad file fails here, naming the file, the line and the field, and leaves no copy.
"""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.data.datasets import build_docs, read_jsonl_numbered, write_jsonl
from headloc.data.documents import check_documents, load_task_yaml, required_fields, task_yaml
from headloc.io import log_to_file
from headloc.workflow.task_lookup import task_folders
from headloc.workflow.portable import mirror

log = log_to_file(snakemake.log[0])
options = snakemake.params.options
mirror_folder = mirror(snakemake.config) if options["mirror"] else None  # this checkout's mirror
data_file = snakemake.config["tasks"][snakemake.wildcards.task].get("data_file")  # params: its digest
if data_file:
    numbered = read_jsonl_numbered(data_file)[: options["n_docs"]]
    source = data_file
else:
    docs = build_docs(options["dataset"], n_docs=options["n_docs"], seed=options["seed"],
                      mirror=mirror_folder)
    numbered = list(enumerate(docs, start=1))
    source = f"dataset {options['dataset']} ({'mirror ' + mirror_folder if mirror_folder else 'hub or built in'})"
task = options["lm_eval_task"]
fields = required_fields(load_task_yaml(task_yaml(task, task_folders(snakemake.config, registry=True))))
check_documents(numbered, fields, source, task=task)
log.info("%d documents from %s, fields %s present in each", len(numbered), source, ", ".join(fields))
write_jsonl([doc for _, doc in numbered], snakemake.output[0])
