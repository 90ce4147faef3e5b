"""One model's universal heads (rule universal_heads): given by universal.heads, else detected
from measured damage (universal.detect: damage, rule single_head_damage's file) or from the
rankings' overlap (universal.detect: ranking); see headloc.workflow.universal and
headloc.workflow.selection."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, read_json, write_json
from headloc.workflow.selection import model_universal_heads

log = log_to_file(snakemake.log[0])
model = snakemake.wildcards.model
recoveries = [read_json(path) for path in snakemake.input.recoveries]
rankings = {r["task"]: r["ranking"] for r in recoveries}
rule = snakemake.params.rule
given = rule["heads"].get(model)
# head -> the tasks it degrades (damage) or hits (ranking, given)
if given is not None or rule["detect"] == "ranking":
    found = model_universal_heads(rankings, snakemake.params.capabilities, rule, model)
elif snakemake.input.get("damage"):
    found = read_json(snakemake.input.damage)["universal"]
else:  # rule single_head_damage measured nothing: the tasks span fewer capabilities than asked
    found = {}
    log.info("the tasks span fewer than %d capabilities: no head can be universal", rule["min_capabilities"])
how = "given by universal.heads" if given is not None else f"detected by {rule['detect']}"
log.info("%d universal heads (%s): %s", len(found), how, ", ".join(found) or "none")
write_json(snakemake.output[0], {
    "model": model,
    "rule": {"top_n": rule["top_n"], "min_capabilities": rule["min_capabilities"], "given": given is not None,
             "detect": None if given is not None else rule["detect"], "min_drop": rule["min_drop"],
             "filtered": rule["filter"], "searches": [r["search"] for r in recoveries]},
    "heads": list(found),
    "hits": found,
    "capabilities": {head: sorted({snakemake.params.capabilities[t] for t in tasks})
                     for head, tasks in found.items()},
})
