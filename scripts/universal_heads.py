"""One model's universal heads (rule universal_heads): detected, or given by universal.heads; see
headloc.selection."""

from headloc.io import log_to_file, read_json, write_json
from headloc.workflow.selection import model_universal_heads

log = log_to_file(snakemake.log[0])
model = snakemake.wildcards.model
recoveries = [read_json(path) for path in snakemake.input]
rankings = {r["task"]: r["ranking"] for r in recoveries}
rule = snakemake.params.rule
given = rule["heads"].get(model)
found = model_universal_heads(rankings, snakemake.params.capabilities, rule, model)
log.info("%d universal heads (%s): %s", len(found), "given by universal.heads" if given is not None else "detected",
         ", ".join(found) or "none")
write_json(snakemake.output[0], {
    "model": model,
    "rule": {"top_n": rule["top_n"], "min_capabilities": rule["min_capabilities"], "given": given is not None,
             "filtered": rule["filter"], "searches": [r["search"] for r in recoveries]},
    "heads": list(found),
    "hits": found,
    "capabilities": {head: sorted({snakemake.params.capabilities[t] for t in tasks})
                     for head, tasks in found.items()},
})
