"""Run a guided search method (guided_greedy) on the identification subset (rule guided_search): one
model load, shared by the scoring task's evaluator (a step's head sets share forward passes,
masks_per_pass at a time) and the gradients of the same documents' gold continuations
(headloc.engine.supervision.task_examples: lm-eval's own prompts); then
headloc.methods.kinds.guided.guided, which resumes from the search's record when a killed run of the
same job left one."""

from headloc.engine.evaluation import TaskSpec, scored
from headloc.engine.supervision import task_examples
from headloc.methods.kinds import guided, sequential
from headloc.model.memory import CPU_ROWS
from headloc.workflow import paths
from headloc.workflow.config import task_folders
from headloc.workflow.jobs import scoring_evaluator, start_evaluating_job
from headloc.workflow.portable import located

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
p = snakemake.params
evaluator = scoring_evaluator(p.location, p.model, p.task, snakemake.input.docs, snakemake.config, log)
gold = TaskSpec(**located(p.gold, snakemake.config)).with_documents(snakemake.input.docs)
examples = task_examples(evaluator.tokenizer, gold, include_path=[str(folder) for folder in task_folders(snakemake.config)])
# documents per gradient pass: memory only, the result does not depend on it (no out-of-memory back-off
# for gradients yet, as rule gradient_search)
batch_size = CPU_ROWS if p.model["batch_size"] == "auto" else p.model["batch_size"]


def score(masks):  # scores and per-document scores (each head's evidence: headloc.search.evidence)
    return scored(evaluator.evaluate_masks(masks, desc=p.guided["method"]))


# a record left by a run on other model files, documents or task files is not resumed
key = sequential.record_key(task_digest=p.task_digest, location=p.location, model=p.model,
                            task={"scoring": p.task, "gold": p.gold}, inputs=list(snakemake.input))
guided.guided(guided.GuidedParams(**p.guided), evaluator.geometry, score, evaluator.model, examples, batch_size,
              paths.RECORD.format(**snakemake.wildcards), snakemake.output[0], log, key=key)
