"""Run a gradient search method (attribution, chg) on the identification subset (rule gradient_search).

One job loads the model once, builds the gold continuations of the subset's documents
(headloc.supervision.task_examples: lm-eval's own prompts) and writes the method's part of
recovery.json (headloc.supervision.recovery_fields: ranking, per-head effects, cost, the method's
own fields) to gradient.json; recover_heads adds the search's identity and top heads.
"""

import time

import torch

from headloc.attribution import attribution
from headloc.chg import chg
from headloc.evaluation import TaskSpec
from headloc.io import log_to_file, write_json
from headloc.models import load_model
from headloc.portable import include_path, located
from headloc.supervision import recovery_fields, task_examples

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
model, tokenizer = load_model(p.location, dtype=p.model["dtype"], device=p.model["device"])
task = TaskSpec(**located(p.task, snakemake.config)).with_documents(snakemake.input.docs)
examples = task_examples(tokenizer, task, include_path=include_path(snakemake.config))
rows = p.model["batch_size"]  # rows per forward pass: memory only, the result does not depend on it
log.info("%s on %s: %d documents, %d tokens per masked evaluation", p.method, task.lm_eval_task, len(examples),
         sum(e.n_tokens for e in examples))

started = time.perf_counter()
if p.method == "attribution":
    result = attribution(model, examples, batch_size=rows)
elif p.method == "chg":
    result = chg(model, examples, seeds=tuple(range(p.chg["seeds"])), lam=p.chg["lam"], init_steps=p.chg["steps"],
                 fit_steps=p.chg["steps"], split_seed=p.seed, rows_per_pass=rows)
else:
    raise ValueError(f"rule gradient_search runs attribution or chg, not {p.method!r}")
fields = recovery_fields(result)
log.info("%s: %d fwd+bwd and %d forward passes in %.1f s, about %d masked evaluations; top heads %s",
         p.method, result.cost.fwd_bwd_passes, result.cost.forward_passes, time.perf_counter() - started,
         fields["n_evals"], ", ".join(fields["ranking"][:5]))
write_json(snakemake.output[0], {"method": p.method, "n_docs": len(examples), **fields})
