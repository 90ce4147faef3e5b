"""Evaluate every task on its full data with one head set ablated (rule validate_headset)."""

from headloc.engine.evaluation import MaskEvaluator, TaskSpec
from headloc.heads import HeadGeometry, headset_mask, parse_headset
from headloc.io import write_json
from headloc.model.loading import load_model
from headloc.workflow.config import task_folders
from headloc.workflow.jobs import start_evaluating_job
from headloc.workflow.portable import located

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
placement = snakemake.params.model  # dtype, device, device_map, batch_size
model, tokenizer = load_model(snakemake.params.location, dtype=placement["dtype"], device=placement["device"],
                              device_map=placement.get("device_map"))
geometry = HeadGeometry.of(model.config)
heads = parse_headset(snakemake.wildcards.headset)
mask = headset_mask(heads, geometry.n_layers, geometry.n_heads)

p = snakemake.params
folders = task_folders(snakemake.config)  # this checkout's task folders (not a param)
for name, options, docs, output in zip(p.names, p.tasks, snakemake.input.docs, snakemake.output):
    task = TaskSpec(**located(options, snakemake.config)).with_documents(docs)
    evaluator = MaskEvaluator(model, tokenizer, task, batch_size=placement["batch_size"], include_path=folders,
                              log=log)
    result = evaluator.evaluate_mask(mask)
    log.info("%s with %s ablated: %s = %.4f on %d documents",
             task.lm_eval_task, snakemake.wildcards.headset, task.metric, result.score, len(result.samples))
    write_json(output, {
        "model": snakemake.wildcards.model,
        "task": name,
        "headset": snakemake.wildcards.headset,
        "heads": heads,
        "metric": task.metric_key,
        "value": result.score,
        "n_docs": len(result.samples),
        "samples": result.samples,
    })
