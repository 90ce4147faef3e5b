"""Evaluate every task on its full data with one head set ablated (rule validate_headset). A head
set that rule single_head_damage already evaluated on every task (the unablated model, a head
alone, a step of a filtered top k) is copied from its records instead: the same tasks, documents,
model and placement."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.heads import parse_headset
from headloc.io import log_to_file, read_json, write_json

p, where = snakemake.params, snakemake.wildcards


def copy(records: dict, source: str) -> None:
    log = log_to_file(snakemake.log[0])
    for name, output in zip(p.names, snakemake.output):
        write_json(output, records[name])
        log.info("%s with %s ablated: %s = %.4f on %d documents (evaluated by rule single_head_damage: %s)",
                 name, where.headset, records[name]["metric"], records[name]["value"], records[name]["n_docs"], source)


def evaluate() -> None:
    from headloc.engine.evaluation import MaskEvaluator  # torch: only where evaluating
    from headloc.engine.lm_eval_tasks import TaskSpec
    from headloc.heads import HeadGeometry, headset_mask
    from headloc.model.loading import load_model
    from headloc.workflow.task_lookup import task_folders
    from headloc.workflow.jobs import start_evaluating_job
    from headloc.workflow.portable import located
    from headloc.workflow.results import eval_record

    log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(p.model.get("device_map")))
    placement = p.model  # dtype, device, device_map, batch_size
    model, tokenizer = load_model(p.location, dtype=placement["dtype"], device=placement["device"],
                                  device_map=placement.get("device_map"))
    geometry = HeadGeometry.of(model.config)
    heads = parse_headset(where.headset)
    mask = headset_mask(heads, geometry.n_layers, geometry.n_heads)
    folders = task_folders(snakemake.config)  # this checkout's task folders (not a param)
    for name, options, docs, output in zip(p.names, p.tasks, snakemake.input.docs, snakemake.output):
        task = TaskSpec(**located(options, snakemake.config)).with_documents(docs)
        evaluator = MaskEvaluator(model, tokenizer, task, batch_size=placement["batch_size"], include_path=folders,
                                  log=log)
        result = evaluator.evaluate_mask(mask)
        log.info("%s with %s ablated: %s = %.4f on %d documents",
                 task.lm_eval_task, where.headset, task.metric, result.score, len(result.samples))
        write_json(output, eval_record(where.model, name, where.headset, heads, task.metric_key, result))


measured = snakemake.input.get("measured")
records = read_json(measured)["evals"].get(where.headset, {}) if measured else {}
if records and all(name in records for name in p.names):
    copy(records, measured)
else:
    evaluate()
