"""Write a task's full documents to JSONL (rule materialize_dataset).

Every kept document is checked for the fields its task's templates read before anything is
written, so a bad file fails here, naming the file, the line and the field, and leaves no copy.
"""

from headloc.data import build_docs, read_jsonl_numbered, write_jsonl
from headloc.documents import check_documents, load_task_yaml, required_fields, task_yaml
from headloc.io import log_to_file

log = log_to_file(snakemake.log[0])
options = snakemake.params.options
data_file = snakemake.input.data_file
if data_file:
    numbered = read_jsonl_numbered(data_file)[: options["n_docs"]]
    source = data_file
else:
    docs = build_docs(options["dataset"], n_docs=options["n_docs"], seed=options["seed"],
                      mirror=options["mirror"])
    numbered = list(enumerate(docs, start=1))
    source = f"dataset {options['dataset']} ({'mirror ' + options['mirror'] if options['mirror'] else 'hub or built in'})"
task = options["lm_eval_task"]
fields = required_fields(load_task_yaml(task_yaml(task, options["task_folders"])))
check_documents(numbered, fields, source, task=task)
log.info("%d documents from %s, fields %s present in each", len(numbered), source, ", ".join(fields))
write_jsonl([doc for _, doc in numbered], snakemake.output[0])
