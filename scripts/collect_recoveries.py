"""Every search's reported heads in one table (rule collect_recoveries)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file, read_json, write_table
from headloc.workflow.plan_tables import collection_selections
from headloc.workflow.selection import with_universal
from headloc.workflow.results import recoveries_frame

log = log_to_file(snakemake.log[0])
recoveries = [read_json(path) for path in snakemake.input.recoveries]
p = snakemake.params
# the universal heads each model's rule universal_heads found (detected or given)
options = with_universal(p.selection, {u["model"]: u["heads"] for u in map(read_json, snakemake.input.universal)})
chosen = collection_selections(p.collection, recoveries, options, p.main_method)
frame = recoveries_frame(recoveries, chosen, options["capabilities"])
for column in ("top_heads", "unconfirmed"):
    frame[column] = frame[column].str.join(",")
# found: empty when none was found above noise, "-" when the search assessed none (no_head_found: why)
frame["found"] = [",".join(heads) if heads is not None else "-" for heads in frame["found"]]
frame["effects"] = frame["effects"].str.join("; ")
write_table(snakemake.output[0], frame)
log.info("%s: %d searches", p.collection, len(frame))
