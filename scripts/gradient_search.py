"""Run a gradient search method (attribution, chg) on the identification subset (rule gradient_search).

One job loads the model once, builds the gold continuations of the subset's documents
(headloc.engine.supervision.task_examples: lm-eval's own prompts) and writes the method's part of
recovery.json (headloc.engine.supervision.recovery_fields: ranking, per-head effects, cost, the method's
own fields) to gradient.json; recover_heads adds the search's identity and top heads.
"""

import time

import torch

from headloc import methods
from headloc.engine.evaluation import TaskSpec
from headloc.io import log_to_file, write_json
from headloc.model.gpus import claim_gpu
from headloc.model.loading import load_model
from headloc.model.memory import CPU_ROWS
from headloc.workflow.portable import include_path, located
from headloc.engine.supervision import recovery_fields, task_examples

log = log_to_file(snakemake.log[0])
claim_gpu(log, spread=bool(snakemake.params.model.get("device_map")))  # before CUDA starts (headloc.model.gpus)
torch.set_num_threads(snakemake.threads)
p = snakemake.params
model, tokenizer = load_model(p.location, dtype=p.model["dtype"], device=p.model["device"],
                              device_map=p.model.get("device_map"))
task = TaskSpec(**located(p.task, snakemake.config)).with_documents(snakemake.input.docs)
examples = task_examples(tokenizer, task, include_path=include_path(snakemake.config))
# rows per forward pass: memory only, the result does not depend on it. No out-of-memory back-off
# for gradients yet, so `auto` is the safe default here, on any device.
rows = CPU_ROWS if p.model["batch_size"] == "auto" else p.model["batch_size"]
log.info("%s on %s: %d documents, %d tokens per masked evaluation", p.method, task.lm_eval_task, len(examples),
         sum(e.n_tokens for e in examples))

started = time.perf_counter()
result = methods.get(p.method).run(model, examples, p.options, p.seed, rows)
fields = recovery_fields(result)
log.info("%s: %d fwd+bwd and %d forward passes in %.1f s, about %d masked evaluations; top heads %s",
         p.method, result.cost.fwd_bwd_passes, result.cost.forward_passes, time.perf_counter() - started,
         fields["n_evals"], ", ".join(fields["ranking"][:5]))
write_json(snakemake.output[0], {"method": p.method, "n_docs": len(examples), **fields})
