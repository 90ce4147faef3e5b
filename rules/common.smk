"""Config validation, wildcard constraints, input functions and the final targets.

Every "which" question (searches, head sets, collected tables, what a recovery reads) is answered by
headloc.workflow.plan.Plan, every model and task fact by headloc.workflow.facts, every path by
headloc.workflow.paths; the functions here only hand their answers to the rules.
"""

import json
import os
import re

from headloc import methods
from headloc.heads import HEADSET_PATTERN
from headloc.report import FIGURES, TABLES
from headloc.workflow import paths
from headloc.workflow.config import check_workflow_config
from headloc.workflow.facts import ModelFacts, TaskFacts
from headloc.workflow.plan import COLLECTIONS, Plan
from headloc.workflow.portable import files_digest

# Every config check, before any job: the schema (filling in defaults), the models, the cross-key
# rules and the plan. A bad config stops here with its key and what is valid (tests/workflow/
# test_config_errors.py).
check_workflow_config(config, os.path.join(workflow.basedir, "config", "schema.yaml"))
PLAN = Plan(config)
MODELS, TASKS, LOCALIZED = PLAN.models, PLAN.tasks, PLAN.localized
SEARCH = config["search"]
MODEL_FACTS = ModelFacts(config)
TASK_FACTS = TaskFacts(config, PLAN)
MIRROR = TASK_FACTS.mirror
RUN_CONFIG = paths.RUN_CONFIG.format(digest=PLAN.digest)


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
    return MODEL_FACTS.prepared(wildcards.model)


def model_identity(wildcards):
    return MODEL_FACTS.identity(wildcards.model)


def model_location(wildcards):
    return MODEL_FACTS.location(wildcards.model)


def model_source(wildcards):
    return config["models"][wildcards.model]["source"]


def model_options(wildcards):
    return MODEL_FACTS.options(wildcards.model)


# ---------------------------------------------------------------- data and tasks


def get_id_subset(wildcards):
    return TASK_FACTS.id_subset(wildcards.task)


def data_file_digest(wildcards):
    return TASK_FACTS.data_file_digest(wildcards.task)


def dataset_options(wildcards):
    return TASK_FACTS.dataset_options(wildcards.task)


def task_digest(wildcards):
    """The content of a task's files, not their paths (headloc.workflow.facts)."""
    return TASK_FACTS.digests[wildcards.task]


def all_task_digests(wildcards):
    return [TASK_FACTS.digests[task] for task in TASKS]


def validation_task_options(wildcards):
    """The task itself (lm_eval_task, metric): full data, document counts, gradient methods."""
    return TASK_FACTS.options(wildcards.task)


def task_options(wildcards):
    """How the searches score masks (tasks.<name>.id_task and id_metric when set)."""
    return TASK_FACTS.scoring_options(wildcards.task)


def all_task_options(wildcards):
    """Task options of every task, in the order of TASKS (and of validate_headset's outputs)."""
    return [TASK_FACTS.options(task) for task in TASKS]


def task_n_docs(wildcards):
    return config["tasks"][wildcards.task]["n_docs"]


def relative(wildcards):
    return config["tasks"][wildcards.task]["relative"]


# ---------------------------------------------------------------- search


def search_of(wildcards):
    return PLAN.search(wildcards.task, wildcards.search)


def search_spec(wildcards):
    return search_of(wildcards).spec()


def search_method(wildcards):
    return search_of(wildcards).method


def search_seed(wildcards):
    """The seed of one search's masks and Lasso folds (search.seed, plus the repeat)."""
    return search_of(wildcards).seed


def method_options(wildcards):
    """The method's own config section (chg's): a change re-runs no other method's search."""
    return PLAN.method_options(search_method(wildcards))


def nested_rows(wildcards):
    """A nested budget's number of rows (the first M of its full design); None: all of them."""
    search = search_of(wildcards)
    return search.n_masks if search.of else None


def universal_heads(wildcards):
    """The model's universal heads, which a method that leaves them out (greedy) never chooses."""
    leaves_out = methods.get(search_method(wildcards)).excludes_universal
    if not (leaves_out and PLAN.excludes_universal):
        return []
    return paths.UNIVERSAL.format(model=wildcards.model)


def round_universal_heads(wildcards):
    """The universal heads for a round's masks: round 1 scores every head alone (the one-shot
    matrix), so it needs none."""
    return universal_heads(wildcards) if int(wildcards.round) > 1 else []


def get_chunk_scores(wildcards):
    return PLAN.chunk_files(paths.SCORES, **wildcards)


def get_round_scores(wildcards):
    return PLAN.chunk_files(paths.ROUND_SCORES, **wildcards)


def get_previous_choice(wildcards):
    """Round r starts from the heads chosen in round r - 1 (round 1 from none)."""
    previous = int(wildcards.round) - 1
    return paths.CHOSEN.format(**{**wildcards, "round": previous}) if previous else []


def get_recovery_input(wildcards):
    return PLAN.recovery_inputs(
        wildcards.model, wildcards.task, wildcards.search, get_model_input(wildcards)
    )


def recovery_file(model, task, search):
    return paths.RECOVERY.format(model=model, task=task, search=search)


def main_recovery_files(wildcards):
    """The main method's recovery of every searched task of one model (universal heads)."""
    return [
        recovery_file(wildcards.model, task, search)
        for task, search in PLAN.searches_of("evals_main")
    ]


def get_tuning_points(wildcards):
    return [
        paths.ID_TOPK.format(search=search, **wildcards)
        for search in PLAN.tuning[wildcards.task]
    ]


# ---------------------------------------------------------------- collected tables


def get_collected_recoveries(wildcards):
    return [
        recovery_file(model, task, search)
        for model in MODELS
        for task, search in PLAN.searches_of(wildcards.collection)
    ]


def ranking(model, task, search):
    """Recovered ranking of a finished search (waits for the recover_heads checkpoint)."""
    found = checkpoints.recover_heads.get(model=model, task=task, search=search)
    with open(found.output[0]) as handle:
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
        headsets = PLAN.headsets(wildcards.collection, rankings, model)
        files += expand(paths.EVAL, model=model, task=TASKS, headset=headsets)
    return files


# ---------------------------------------------------------------- tables, figures and all


def table_files(tables):
    return expand(paths.TABLE, table=tables, ext=["md", "csv", "tex"])


def figure_files(figures):
    return expand(paths.FIGURE, figure=figures, ext=["png", "pdf"])


def report_inputs(spec):
    """The collected tables one table or figure reads, named as its builder expects."""
    return {name: PLAN.collected_path(name) for name in spec.inputs}


def heatmap_files():
    """Every search's layers x heads heatmap (target `heatmaps`)."""
    return [
        paths.HEATMAP.format(model=model, task=task, search=search)
        for model in MODELS
        for task in PLAN.searches
        for search in PLAN.searches[task]
    ]


def report_targets():
    tables = [name for name in TABLES if name != "tuning" or PLAN.tuning]
    universal = expand(paths.UNIVERSAL, model=MODELS) if LOCALIZED else []
    published = expand(paths.PUBLISHED, name=["evals_all", "recoveries"])
    return (
        table_files(tables)
        + figure_files(list(FIGURES))
        + published
        + universal
        + heatmap_files()
    )
