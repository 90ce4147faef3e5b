"""Run a gradient search method (attribution, chg) on the identification subset (rule gradient_search).

One job loads the model once, builds the gold continuations of the subset's documents
(headloc.engine.supervision.task_examples: lm-eval's own prompts) and makes the step
headloc.methods.kinds.gradient.gradient: the method's part of recovery.json, in gradient.json;
recover_heads adds the search's identity and top heads.
"""

from headloc.engine.evaluation import TaskSpec
from headloc.engine.supervision import task_examples
from headloc.methods.kinds import gradient
from headloc.model.loading import load_model
from headloc.model.memory import CPU_ROWS
from headloc.workflow.config import task_folders
from headloc.workflow.jobs import start_evaluating_job
from headloc.workflow.portable import located

log = start_evaluating_job(snakemake.log[0], snakemake.threads, spread=bool(snakemake.params.model.get("device_map")))
p = snakemake.params
model, tokenizer = load_model(p.location, dtype=p.model["dtype"], device=p.model["device"],
                              device_map=p.model.get("device_map"))
task = TaskSpec(**located(p.task, snakemake.config)).with_documents(snakemake.input.docs)
examples = task_examples(tokenizer, task, include_path=[str(folder) for folder in task_folders(snakemake.config)])
# rows per forward pass: memory only, the result does not depend on it. No out-of-memory back-off
# for gradients yet, so `auto` is the safe default here, on any device.
batch_size = CPU_ROWS if p.model["batch_size"] == "auto" else p.model["batch_size"]
log.info("%s on %s: %d documents, %d tokens per masked evaluation", p.gradient["method"], task.lm_eval_task,
         len(examples), sum(e.n_tokens for e in examples))
gradient.gradient(gradient.GradientParams(**p.gradient), model, examples, batch_size, snakemake.output[0], log)
