"""Measure heads ablated alone on every task's full data (rule single_head_damage): one model load,
each task's candidate heads scored masks_per_pass at a time, in rounds until every task's filtered
top k is measured (headloc.workflow.universal.measure_heads); the universal heads among them. Every
evaluation's record (the unablated model's, each head's) goes to a second file, which rule
validate_headset copies instead of evaluating those head sets again."""

import numpy as np

from headloc.engine.evaluation import MaskEvaluator, check_grouping
from headloc.engine.lm_eval_tasks import TaskSpec
from headloc.heads import HeadGeometry, headset_mask
from headloc.io import read_json, write_json
from headloc.model.loading import load_model
from headloc.workflow.task_lookup import task_folders
from headloc.workflow.jobs import start_evaluating_job
from headloc.workflow.portable import located
from headloc.workflow.results import eval_record
from headloc.workflow.universal import head_damage, measure_heads

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
tasks = {name: {"metric": evaluators[name].task.metric_key, "higher_is_better": p.directions[name],
                "baseline": found.score, "n_docs": len(found.samples)} for name, found in baselines.items()}
model_name = snakemake.wildcards.model
records = {"none": {name: eval_record(model_name, name, "none", [], evaluators[name].task.metric_key, found)
                    for name, found in baselines.items()}}


def evaluate(heads):
    masks = np.array([headset_mask([head], geometry.n_layers, geometry.n_heads).reshape(-1) for head in heads])
    damage = {head: {} for head in heads}
    for name, evaluator in evaluators.items():
        for head, found in zip(heads, evaluator.evaluate_masks(masks, desc=f"{name}: heads alone")):
            damage[head][name] = head_damage(baselines[name].score, found.score, baselines[name].per_doc,
                                             found.per_doc, p.directions[name])
            records.setdefault(head, {})[name] = eval_record(model_name, name, head, [head],
                                                             evaluator.task.metric_key, found)
    return damage


rankings = {found["task"]: found["ranking"] for found in map(read_json, snakemake.input.recoveries)}
rule = p.rule
damage, universal = measure_heads(evaluate, rankings, tasks, p.capabilities, top_n=rule["top_n"], k=p.k,
                                  min_drop=rule["min_drop"], min_capabilities=rule["min_capabilities"], log=log)
log.info("%d heads measured alone; universal: %s", len(damage), ", ".join(universal) or "none")
write_json(snakemake.output.evals, {"model": model_name, "evals": records})
write_json(snakemake.output.heads, {
    "model": model_name,
    "rule": rule | {"k": p.k},
    "tasks": tasks,
    "heads": damage,
    "universal": universal,
})
