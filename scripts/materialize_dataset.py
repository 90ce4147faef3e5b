"""Write a task's full documents to JSONL (rule materialize_dataset)."""

from headloc.data import build_docs, read_jsonl, write_jsonl
from headloc.io import log_to_file

log = log_to_file(snakemake.log[0])
options = snakemake.params.options
if options["data_file"]:
    docs = read_jsonl(options["data_file"])[: options["n_docs"]]
    log.info("read %d documents from %s", len(docs), options["data_file"])
else:
    docs = build_docs(options["dataset"], n_docs=options["n_docs"], seed=options["seed"],
                      mirror=options["mirror"])
    log.info("built %d documents of dataset %s (seed %d, %s)", len(docs), options["dataset"],
             options["seed"], f"mirror {options['mirror']}" if options["mirror"] else "hub or built in")
write_jsonl(docs, snakemake.output[0])
