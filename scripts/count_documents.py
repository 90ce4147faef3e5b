"""Record the evaluation documents of a task that reads its own data (rule count_documents).

headloc does not copy such a task's documents; it builds the task through lm-eval, counts the
documents it evaluates, and writes the indices the full-data validation scores (the first
``n_docs``, or all).
"""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.engine.lm_eval_tasks import TaskSpec, count_documents
from headloc.io import log_to_file, write_json
from headloc.workflow.task_lookup import task_folders
from headloc.workflow.portable import located

log = log_to_file(snakemake.log[0])
task = TaskSpec(**located(snakemake.params.task, snakemake.config))
total = count_documents(task, task_folders(snakemake.config))
if total == 0:
    raise ValueError(f"task {task.lm_eval_task} has no evaluation documents; check the data_files and "
                     "splits in its YAML")
n_docs = min(total, snakemake.params.n_docs or total)
log.info("%s: %d evaluation documents, %d used", task.lm_eval_task, total, n_docs)
write_json(snakemake.output[0], {"task": task.lm_eval_task, "total": total, "doc_ids": list(range(n_docs))})
