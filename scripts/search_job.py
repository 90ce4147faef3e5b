"""Run a search whose method's kind runs it in one job (rule search_job: gradient, sequential and
guided searches): the model loaded once (headloc.workflow.jobs.one_job), then the kind's one step
(headloc.methods.one_job.OneJob.run), which writes <kind>.json and, for a search that scores masks,
resumes from the record a killed run of the same job left."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc import methods
from headloc.workflow import paths
from headloc.workflow.jobs import one_job, start_evaluating_job

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
p = snakemake.params
kind = methods.get(p.step["method"]).kind
if kind.name != snakemake.wildcards.kind:
    raise ValueError(f"{snakemake.output[0]}: search {snakemake.wildcards.search} is a {kind.name} search, "
                     f"whose result is {kind.name}.json")
folder = paths.SEARCH.format(**snakemake.wildcards)
job = one_job(kind, p, folder, snakemake.input.docs, list(snakemake.input), snakemake.config, log)
kind.run(kind.steps[kind.name](**p.step), job)
