"""Config validation, wildcard constraints, input functions and the final targets.

Every "which" question (searches, head sets, collected tables, what a table reads) is answered by
headloc.plan.Plan; the functions here only turn its answers into paths.
"""

import json
import os
import re

from headloc.config import check_workflow_config, task_folders
from headloc.data import DATASETS
from headloc.documents import (
    lm_eval_tasks_dir,
    load_task_yaml,
    reads_own_documents,
    task_files,
    task_yaml,
)
from headloc.paper_data import mirror_files
from headloc.portable import (
    checkout_relative,
    files_digest,
    lm_eval_version,
    mirror,
    source_identity,
)
from headloc.heads import HEADSET_PATTERN
from headloc.models import resolve_source
from headloc.plan import COLLECTIONS, GRADIENT_METHODS, Plan
from headloc.report import FIGURES, TABLES

# Every config check, before any job: the schema (filling in defaults), the models, the cross-key
# rules and the plan. A bad config stops here with its key and what is valid (tests/workflow/
# test_config_errors.py).
check_workflow_config(config, os.path.join(workflow.basedir, "config", "schema.yaml"))
PLAN = Plan(config)
MODELS, TASKS, LOCALIZED = PLAN.models, PLAN.tasks, PLAN.localized
SEARCH = config["search"]
DATA = config["data"]
MIRROR = mirror(config)  # the same folder the jobs find (headloc.portable.mirror)
TASK_FOLDERS = task_folders(
    config
)  # headloc's tasks and include_path, handed to lm-eval
LOOKUP_FOLDERS = [*TASK_FOLDERS, lm_eval_tasks_dir()]  # and lm-eval's registry
TASK_CONFIGS = {
    task: load_task_yaml(task_yaml(spec["lm_eval_task"], LOOKUP_FOLDERS))
    for task, spec in config["tasks"].items()
}


# Each model's source, resolved once (check_workflow_config has resolved them all: none fails here).
SOURCES = {
    name: resolve_source(spec["source"]) for name, spec in config["models"].items()
}


def alternatives(names):
    return "|".join(re.escape(name) for name in sorted(names)) or "(?!)"


wildcard_constraints:
    model=alternatives(MODELS),
    task=alternatives(TASKS),
    search=alternatives(PLAN.all_search_ids()),
    chunk=r"\d+",
    round=r"\d+",
    n=r"\d+",
    seed=r"\d+",
    headset=HEADSET_PATTERN,
    digest=PLAN.digest,


# ---------------------------------------------------------------- models


def get_model_input(wildcards):
    """The prepared checkpoint folder, for models that need preparation (GGUF); else nothing."""
    if SOURCES[wildcards.model].needs_preparation:
        return f"results/models/{wildcards.model}"
    return []


def model_identity(wildcards):
    """What a prepared model is made from (prepare_model finds the GGUF itself): an embedded
    model's package and version, or a GGUF file's name and size; never the virtualenv's path.
    """
    return source_identity(
        config["models"][wildcards.model]["source"], SOURCES[wildcards.model]
    )


def model_location(wildcards):
    """What transformers loads: the prepared folder, a local directory (relative to the working
    directory when inside it) or a hub id."""
    source = SOURCES[wildcards.model]
    return (
        f"results/models/{wildcards.model}"
        if source.needs_preparation
        else checkout_relative(source.location)
    )


def model_source(wildcards):
    return config["models"][wildcards.model]["source"]


def model_options(wildcards):
    spec = config["models"][wildcards.model]
    return {
        key: spec[key] for key in ("dtype", "device", "batch_size", "masks_per_pass")
    }


# ---------------------------------------------------------------- data and tasks


def copies_documents(task):
    """Whether headloc copies the task's documents into results/data (a dataset built into headloc,
    or the task's data_file, handed to its custom_dataset loader); otherwise the task reads its own
    documents (dataset_path: the hub, json, csv, ...) and headloc records which ones it scores.
    """
    spec = config["tasks"][task]
    builtin = spec.get("data_file") or spec.get("dataset", task) in DATASETS
    return bool(builtin) and not reads_own_documents(TASK_CONFIGS[task])


def full_documents(task):
    """The task's full-data documents: a JSONL copy, or the record of its own documents' indices."""
    name = "test.jsonl" if copies_documents(task) else "documents.json"
    return f"results/data/{task}/{name}"


def get_id_subset(wildcards):
    task = wildcards.task
    suffix = "jsonl" if copies_documents(task) else "json"
    return f"results/data/{task}/id_{PLAN.id_docs(task)}_seed{SEARCH['seed']}.{suffix}"


def data_file_digest(wildcards):
    """A task's own JSONL file, by its content: an edited file re-runs what depends on it, a moved
    or freshly cloned one (a new path or modification time) does not. The job reads the file named
    by the config."""
    data_file = config["tasks"][wildcards.task].get("data_file")
    return files_digest([data_file], [os.getcwd()]) if data_file else None


def dataset_options(wildcards):
    spec = config["tasks"][wildcards.task]
    return {
        "dataset": spec.get("dataset", wildcards.task),
        "n_docs": spec["n_docs"],
        "seed": SEARCH["seed"],
        "mirror": bool(MIRROR),
        "lm_eval_task": spec["lm_eval_task"],
    }


def files_of_task(task):
    """Every file a task's results depend on besides its documents: its YAML (and its id_task's),
    what they include, the Python and data beside them, its local data files, and the data mirror's
    files of its dataset.
    """
    spec = config["tasks"][task]
    mirrored = mirror_files(spec.get("dataset", task), MIRROR)
    names = dict.fromkeys([spec["lm_eval_task"], PLAN.id_scoring(task)[0]])
    found = [path for name in names for path in task_files(name, LOOKUP_FOLDERS)]
    return [*dict.fromkeys(found), *map(str, mirrored)]


TASK_FILES = {task: files_of_task(task) for task in TASKS}  # found once, not per job

# A task's identity in what decides re-runs: the content of its files, each named relative to its
# task folder (or the mirror, or the working directory), and lm-eval's version; no absolute path,
# so a results folder moved to another clone stays up to date and an edited file re-runs its jobs.
DIGEST_ROOTS = [*LOOKUP_FOLDERS, *([MIRROR] if MIRROR else []), os.getcwd()]
TASK_DIGESTS = {
    task: f"lm_eval=={lm_eval_version()}:{files_digest(files, DIGEST_ROOTS)}"
    for task, files in TASK_FILES.items()
}


def task_digest(wildcards):
    return TASK_DIGESTS[wildcards.task]


def all_task_digests(wildcards):
    return [TASK_DIGESTS[task] for task in TASKS]


def options_of_task(task):
    """Everything an evaluation job needs to build the lm-eval task (its documents added by the job).

    headloc's data options (mirror, code execution, the task's dataset_kwargs) go only to tasks
    with a custom_dataset loader, as lm-eval metadata; a dataset_path task gets none of them.
    """
    spec = config["tasks"][task]
    data = {
        "mirror": bool(MIRROR),
        "allow_code_execution": DATA["allow_code_execution"],
    }
    loader = (
        {}
        if reads_own_documents(TASK_CONFIGS[task])
        else {**data, **spec["dataset_kwargs"]}
    )
    return {
        "lm_eval_task": spec["lm_eval_task"],
        "metric": spec["metric"],
        "chat": spec["chat"],
        "dataset_kwargs": loader,
    }


def validation_task_options(wildcards):
    """The task itself (lm_eval_task, metric): full data, document counts, gradient methods."""
    return options_of_task(wildcards.task)


def task_options(wildcards):
    """How the searches score masks on the identification subset: tasks.<name>.id_task and
    id_metric when set (a continuous score), else the task itself."""
    lm_eval_task, metric = PLAN.id_scoring(wildcards.task)
    return {
        **options_of_task(wildcards.task),
        "lm_eval_task": lm_eval_task,
        "metric": metric,
    }


def task_n_docs(wildcards):
    return config["tasks"][wildcards.task]["n_docs"]


def all_task_options(wildcards):
    """Task options of every task, in the order of TASKS (and of validate_headset's outputs)."""
    return [options_of_task(task) for task in TASKS]


def relative(wildcards):
    return config["tasks"][wildcards.task]["relative"]


# ---------------------------------------------------------------- search


def search_spec(wildcards):
    return PLAN.search(wildcards.task, wildcards.search).spec()


def search_method(wildcards):
    return PLAN.search(wildcards.task, wildcards.search).method


def search_seed(wildcards):
    """The seed of one search's masks and Lasso folds (search.seed, plus the repeat)."""
    return PLAN.search(wildcards.task, wildcards.search).seed


def nested_rows(wildcards):
    """A nested budget's number of rows (the first M of its full design); None: all of them."""
    search = PLAN.search(wildcards.task, wildcards.search)
    return search.n_masks if search.of else None


def greedy_universal(wildcards):
    """Greedy with the universal filter on: the model's universal heads, which no round chooses."""
    if not PLAN.greedy_excludes_universal:
        return []
    return f"results/{wildcards.model}/universal_heads.json"


def greedy_universal_masks(wildcards):
    """The universal heads for a round's masks: rounds after the first never ablate them (round 1
    scores every head alone, the one-shot matrix, so it needs no universal heads)."""
    return greedy_universal(wildcards) if int(wildcards.round) > 1 else []


def gradient_search_ids():
    """Searches of the gradient methods (rule gradient_search makes no others)."""
    return {
        search.id
        for searches in PLAN.searches.values()
        for search in searches.values()
        if search.method in GRADIENT_METHODS
    }


def chg_options(wildcards):
    """The chg section, for chg searches only (a changed chg section re-runs no other search)."""
    return config["chg"] if search_method(wildcards) == "chg" else {}


def chunk_files(pattern, **wildcards):
    return expand(pattern, chunk=range(SEARCH["chunks"]), **wildcards)


def get_chunk_scores(wildcards):
    return chunk_files(
        "results/{model}/{task}/{search}/scores/{chunk}.tsv", **wildcards
    )


def get_greedy_round_scores(wildcards):
    return chunk_files(
        "results/{model}/{task}/{search}/round{round}/scores/{chunk}.tsv", **wildcards
    )


def get_previous_choice(wildcards):
    """Round r starts from the heads chosen in round r - 1 (round 1 from none)."""
    previous = int(wildcards.round) - 1
    if previous == 0:
        return []
    return f"results/{wildcards.model}/{wildcards.task}/{wildcards.search}/round{previous}/chosen.json"


def get_recovery_input(wildcards):
    """Compressed sensing and one-shot greedy: the masks and their scores; greedy: its rounds;
    the gradient methods (attribution, chg): what rule gradient_search found."""
    search = PLAN.search(wildcards.task, wildcards.search)
    method = search.method
    if search.rows_of:  # a nested budget, or one-shot greedy on greedy's round 1
        return {
            "masks": f"results/{wildcards.model}/{wildcards.task}/{search.rows_of}/masks.npy",
            "scores": chunk_files(
                "results/{model}/{task}/{rows_of}/scores/{chunk}.tsv",
                model=wildcards.model,
                task=wildcards.task,
                rows_of=search.rows_of,
            ),
        }
    if method in GRADIENT_METHODS:
        return {
            "gradient": "results/{model}/{task}/{search}/gradient.json".format(
                **wildcards
            )
        }
    if method == "greedy":
        return {
            "rounds": expand(
                "results/{model}/{task}/{search}/round{round}/chosen.json",
                round=range(1, PLAN.top_k + 1),
                **wildcards,
            )
        }
    found = {
        "masks": "results/{model}/{task}/{search}/masks.npy".format(**wildcards),
        "scores": get_chunk_scores(wildcards),
    }
    if method == "cs_adaptive":
        found["stage2_masks"] = (
            "results/{model}/{task}/{search}/stage2/masks.npy".format(**wildcards)
        )
        found["stage2_scores"] = chunk_files(
            "results/{model}/{task}/{search}/stage2/scores/{chunk}.tsv", **wildcards
        )
    return found


def recovery_file(model, task, search):
    return f"results/{model}/{task}/{search}/recovery.json"


def main_recovery_files(wildcards):
    """The main method's recovery of every searched task of one model (universal heads)."""
    return [
        recovery_file(wildcards.model, task, search)
        for task, search in PLAN.searches_of("evals_main")
    ]


def get_tuning_points(wildcards):
    return expand(
        "results/{model}/{task}/{search}/id_topk.json",
        search=PLAN.tuning[wildcards.task],
        **wildcards,
    )


# ---------------------------------------------------------------- collected tables


def collected(name):
    """This config's copy of a collected table (results/runs/<config digest>/<name>.tsv)."""
    return PLAN.collected_path(name)


RUN_CONFIG = f"results/runs/{PLAN.digest}/config.yaml"


def get_published(wildcards):
    return collected(wildcards.name)


def collection(wildcards):
    return wildcards.collection


def get_collected_recoveries(wildcards):
    return [
        recovery_file(model, task, search)
        for model in MODELS
        for task, search in PLAN.searches_of(wildcards.collection)
    ]


def ranking(model, task, search):
    """Recovered ranking of a finished search (waits for the recover_heads checkpoint)."""
    recovery = checkpoints.recover_heads.get(
        model=model, task=task, search=search
    ).output[0]
    with open(recovery) as handle:
        return json.load(handle)["ranking"]


def get_collected_evals(wildcards):
    """The evaluation files one collected evals table needs: for each model, every task with each
    head set the collection's searches select (after their recover_heads checkpoints).
    """
    files = []
    for model in MODELS:
        rankings = {
            (task, search): ranking(model, task, search)
            for task, search in PLAN.searches_of(wildcards.collection)
        }
        files += expand(
            "results/{model}/evals/{task}/{headset}.json",
            model=model,
            task=TASKS,
            headset=PLAN.headsets(wildcards.collection, rankings, model),
        )
    return files


def tuning_files():
    return [
        f"results/{model}/{task}/tuning.json"
        for model in MODELS
        for task in PLAN.tuning
    ]


# ---------------------------------------------------------------- tables, figures and all


def table_files(tables):
    return expand(
        "results/tables/{table}.{ext}", table=tables, ext=["md", "csv", "tex"]
    )


def figure_files(figures):
    return expand("results/figures/{figure}.{ext}", figure=figures, ext=["png", "pdf"])


def report_inputs(spec):
    """The collected tables one table or figure reads, named as its builder expects."""
    return {name: collected(name) for name in spec.inputs}


def table_inputs(wildcards):
    return report_inputs(TABLES[wildcards.table])


def figure_inputs(wildcards):
    return report_inputs(FIGURES[wildcards.figure])


def report_targets():
    tables = [name for name in TABLES if name != "tuning" or PLAN.tuning]
    universal = (
        expand("results/{model}/universal_heads.json", model=MODELS)
        if LOCALIZED
        else []
    )
    published = expand("results/tables/{name}.tsv", name=["evals_all", "recoveries"])
    return (
        table_files(tables)
        + figure_files(list(FIGURES))
        + published
        + universal
        + heatmap_files()
    )


def heatmap_files():
    """Every search's layers x heads heatmap (target `heatmaps`)."""
    return [
        f"results/{m}/{t}/{s}/heatmap.png"
        for m in MODELS
        for t in PLAN.searches
        for s in PLAN.searches[t]
    ]
