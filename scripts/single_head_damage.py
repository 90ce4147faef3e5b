"""Measure heads ablated alone and in context on every task's full data (rule single_head_damage):
one model load, each round's head sets scored masks_per_pass at a time, in rounds until every
task's filtered top k and its cumulative sets are measured (headloc.workflow.universal.measure_heads);
the universal heads among them. Every evaluation's record (the unablated model's, each head set's)
goes to a second file, which rule validate_headset copies instead of evaluating those head sets again."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

import numpy as np

from headloc.engine.evaluation import MaskEvaluator, check_grouping
from headloc.engine.lm_eval_tasks import TaskSpec
from headloc.heads import NO_HEADS, HeadGeometry, format_headset, headset_mask, parse_headset
from headloc.io import read_json, write_json
from headloc.model.loading import load_model
from headloc.workflow.task_lookup import task_folders
from headloc.workflow.jobs import start_evaluating_job
from headloc.workflow.portable import located
from headloc.workflow.results import eval_record
from headloc.workflow.universal import measure_heads

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
p, placement = snakemake.params, snakemake.params.model
check_grouping(placement["batch_size"], placement["masks_per_pass"], placement["device"])
model, tokenizer = load_model(p.location, dtype=placement["dtype"], device=placement["device"],
                              device_map=placement.get("device_map"))
geometry = HeadGeometry.of(model.config)
evaluators = {name: MaskEvaluator(model, tokenizer, TaskSpec(**located(options, snakemake.config)).with_documents(docs),
                                  batch_size=placement["batch_size"], masks_per_pass=placement["masks_per_pass"],
                                  include_path=task_folders(snakemake.config), log=log)
              for name, options, docs in zip(p.names, p.tasks, snakemake.input.docs)}
baselines = {name: evaluator.evaluate_mask(np.zeros(geometry.total, dtype=np.int8)) for name, evaluator in evaluators.items()}
tasks = {name: {"metric": evaluators[name].task.metric_key, "unit": p.units[name], "higher_is_better": p.directions[name],
                "baseline": found.score, "n_docs": len(found.samples)} for name, found in baselines.items()}
model_name = snakemake.wildcards.model
records = {NO_HEADS: {name: eval_record(model_name, name, NO_HEADS, [], evaluators[name].task.metric_key, found)
                      for name, found in baselines.items()}}


def evaluate(headsets):
    masks = np.array([headset_mask(heads, geometry.n_layers, geometry.n_heads).reshape(-1) for heads in headsets])
    names = [format_headset(heads) for heads in headsets]
    scores = {name: {} for name in names}
    for task, evaluator in evaluators.items():
        for name, found in zip(names, evaluator.evaluate_masks(masks, desc=f"{task}: head sets")):
            scores[name][task] = found  # a MaskResult: its score and per_doc
            records.setdefault(name, {})[task] = eval_record(model_name, task, name, parse_headset(name),
                                                             evaluator.task.metric_key, found)
    return scores


rankings = {found["task"]: found["ranking"] for found in map(read_json, snakemake.input.recoveries)}
rule = p.rule
measured = measure_heads(evaluate, baselines,
                         rankings, tasks, p.capabilities, top_n=rule["top_n"], k=p.k, min_drop=rule["min_drop"],
                         min_capabilities=rule["min_capabilities"], log=log)
log.info("%d heads measured alone, %d steps in context; universal: %s", len(measured.alone),
         len(measured.in_context), ", ".join(measured.universal) or "none")
write_json(snakemake.output.evals, {"model": model_name, "evals": records})
write_json(snakemake.output.heads, {
    "model": model_name,
    "rule": rule | {"k": p.k},
    "tasks": {name: facts | {"scale": measured.scales[name]} for name, facts in tasks.items()},
    "heads": measured.alone,
    "in_context": measured.in_context,
    "universal": measured.universal,
    "sets": list(records),  # every head set evaluated (rule validate_headset copies these)
})
