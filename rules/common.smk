"""Config validation, wildcard constraints and the input functions of the model, data, search and
recovery rules (those of the report and the final targets: rules/report_inputs.smk).

Every "which" question (searches, head sets, collected tables, what a recovery reads) is answered by
headloc.workflow.plan.Plan, every model and task fact by headloc.workflow.facts, every path by
headloc.workflow.paths; the functions here only hand their answers to the rules.
"""

import json
import os
import re
import sys
from dataclasses import asdict

from headloc import collected, methods
from headloc.heads import HEADSET_PATTERN
from headloc.report import FIGURES, TABLES, ReportOptions
from headloc.workflow import paths
from headloc.workflow.config import check_workflow_config
from headloc.workflow.facts import ModelFacts, TaskFacts
from headloc.workflow.gpu_plan import plan_warnings
from headloc.workflow.plan import Plan
from headloc.workflow.universal import damage_rule
from snakemake.exceptions import WorkflowError

# Every config check, before any job: the schema (filling in defaults), the models, the cross-key
# rules and the plan. A bad config stops here with its key and what is valid (tests/workflow/
# test_config_errors.py).
check_workflow_config(config, os.path.join(workflow.basedir, "config", "schema.yaml"))
PLAN = Plan(config)
MODELS, TASKS, LOCALIZED = PLAN.models, PLAN.tasks, PLAN.localized
MODEL_FACTS = ModelFacts(config)
TASK_FACTS = TaskFacts(config, PLAN)
RUN_CONFIG = paths.RUN_CONFIG.format(digest=PLAN.digest)
# GPU models whose passes may not fit their GPU: a warning each (headloc.workflow.gpu_plan)
for _warning in plan_warnings(config, TASK_FACTS.yamls):
    print(f"headloc: warning: {_warning}", file=sys.stderr)


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


# ---------------------------------------------------------------- models, data and tasks


def per_model(answer):
    """An input function or param: ``answer`` for the job's model."""
    return lambda wildcards: answer(wildcards.model)


def per_task(answer):
    """An input function or param: ``answer`` for the job's task."""
    return lambda wildcards: answer(wildcards.task)


get_model_input = per_model(
    MODEL_FACTS.prepared
)  # a GGUF's converted folder, else nothing
model_identity = per_model(MODEL_FACTS.identity)
model_location = per_model(MODEL_FACTS.location)
model_options = per_model(MODEL_FACTS.options)
model_source = per_model(lambda model: config["models"][model]["source"])

get_id_subset = per_task(TASK_FACTS.id_subset)
data_file_digest = per_task(TASK_FACTS.data_file_digest)
dataset_options = per_task(TASK_FACTS.dataset_options)
task_digest = per_task(
    TASK_FACTS.digests.get
)  # the content of its files, not their paths
validation_task_options = per_task(
    TASK_FACTS.options
)  # the task itself: full data, gradients
task_options = per_task(
    TASK_FACTS.scoring_options
)  # how searches score (id_task, id_metric)
# Whether the searches' scoring metric is higher-is-better, as the task declares it.
scoring_direction = per_task(TASK_FACTS.scoring_higher_is_better)
task_n_docs = per_task(lambda task: config["tasks"][task]["n_docs"])
# how tuning shows its scores: percentage points, percent of the baseline or the metric's unit
scoring_unit = per_task(lambda task: PLAN.unit(task, scoring=True))


def all_task_digests(wildcards):
    return [TASK_FACTS.digests[task] for task in TASKS]


def all_task_options(wildcards):
    """Task options of every task, in the order of TASKS (and of validate_headset's outputs)."""
    return [TASK_FACTS.options(task) for task in TASKS]


# ---------------------------------------------------------------- search


def per_search(answer):
    """An input function or param: ``answer`` for the job's search (a headloc.workflow.plan.Search)."""
    return lambda wildcards: answer(PLAN.search(wildcards.task, wildcards.search))


grid_point = per_search(lambda search: search.grid_point())
search_method = per_search(lambda search: search.method)


def step_params(step, **facts):
    """A param: what ``step`` of the job's search is told, the dataclass its method's kind builds
    (headloc.methods.kinds; ``facts``, param functions, by keyword), as a dict: a plain value, whose
    change Snakemake sees (it ignores a dataclass)."""
    return lambda wildcards: asdict(
        PLAN.step_params(
            wildcards.task,
            wildcards.search,
            step,
            **{key: fact(wildcards) for key, fact in facts.items()},
        )
    )


ONE_JOB_KINDS = methods.kinds.one_job()


def search_kind(wildcards):
    return methods.get(search_method(wildcards)).kind


def one_job_tasks(wildcards):
    """The task options a one-job search reads, by role: how it scores masks (a kind that scores),
    the task whose gold continuations it differentiates (a kind that does)."""
    kind = search_kind(wildcards)
    roles = {
        "scoring": (kind.scored, task_options),
        "gold": (kind.gold, validation_task_options),
    }
    return {role: options(wildcards) for role, (used, options) in roles.items() if used}


def one_job_step(wildcards):
    """A one-job search's step parameters (its step is named as its kind)."""
    return step_params(search_kind(wildcards).name, higher_is_better=scoring_direction)(
        wildcards
    )


def universal_heads(wildcards):
    """The model's universal heads, which a method that leaves them out (greedy) never chooses."""
    leaves_out = methods.get(search_method(wildcards)).excludes_universal
    if not (leaves_out and PLAN.universal_filter):
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
        for task, search in PLAN.main_searches()
    ]


def universal_damage(wildcards):
    """The heads measured alone, where the model's universal heads are detected from damage."""
    universal = config["universal"]
    if universal["detect"] != "damage" or wildcards.model in universal["heads"]:
        return []
    if len(set(PLAN.capabilities.values())) < universal["min_capabilities"]:
        return []  # no head can degrade that many capabilities: nothing to measure
    return paths.SINGLE_HEADS.format(model=wildcards.model)


def measured_evals(wildcards):
    """Rule single_head_damage's evaluation records where that job runs (universal.detect: damage)
    and evaluated this head set (the unablated model, a head alone, a step of a filtered top k):
    validate_headset copies them. Which sets of several heads it evaluated is known once the
    model's universal heads are (a checkpoint)."""
    found = universal_damage(wildcards)
    if not found:
        return []
    if "+" in wildcards.headset:
        checkpoints.universal_heads.get(model=wildcards.model)
        with open(found) as handle:
            if wildcards.headset not in json.load(handle)["sets"]:
                return []
    return paths.SINGLE_HEAD_EVALS.format(model=wildcards.model)


def found_universal(model):
    """The model's universal heads as rule universal_heads found them (after its checkpoint)."""
    found = checkpoints.universal_heads.get(model=model)
    with open(found.output[0]) as handle:
        return json.load(handle)["heads"]


def universal_files(wildcards):
    """Every model's universal heads: the selections of the collected tables read them."""
    return expand(paths.UNIVERSAL, model=MODELS) if LOCALIZED else []


def get_tuning_points(wildcards):
    return [
        paths.ID_TOPK.format(search=search, **wildcards)
        for search in PLAN.tuning[wildcards.task]
    ]
