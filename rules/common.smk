"""Config validation, wildcard constraints and every input function of the workflow."""

import json
import os
import re

from headloc.config import check_config, model_geometries, validate_config
from headloc.heads import HEADSET_PATTERN, format_headset
from headloc.models import resolve_source
from headloc.selection import select_heads

validate_config(config, os.path.join(workflow.basedir, "config", "schema.yaml"))
check_config(config, model_geometries(config))

MODELS = list(config["models"])
TASKS = list(config["tasks"])  # every task is evaluated when validating
LOCALIZED = [
    task for task in TASKS if config["tasks"][task]["localize"]
]  # and these are searched
SEARCH = config["search"]
VALIDATION = config["validation"]
TOP_K = VALIDATION["top_k"]
MAIN_METHOD = VALIDATION["method"]
GEN_TASKS = VALIDATION["gen_tasks"]
UNIVERSAL = config["universal"]
KNOWLEDGE = config["knowledge"]
DATA = config["data"]
MIRROR = os.path.abspath(DATA["mirror"]) if DATA["mirror"] else None


def model_sources():
    """Resolve every model name now, so a typo fails before any job runs."""
    sources = {}
    for name, spec in config["models"].items():
        try:
            sources[name] = resolve_source(spec["source"])
        except ValueError as error:
            raise ValueError(f"config models.{name}.source: {error}") from None
    return sources


SOURCES = model_sources()


def capability(task):
    return config["tasks"][task]["capability"] or task


CAPABILITIES = {task: capability(task) for task in TASKS}

# ---------------------------------------------------------------- searches


def id_docs(task):
    """Identification subset size: the task's own, or the search default."""
    return config["tasks"][task]["id_docs"] or SEARCH["id_docs"]


def search_settings(task):
    """The search section with the task's own overrides (methods, n_masks, sparsity)."""
    return {**SEARCH, **config["tasks"][task]["search"]}


def search_id(task, method, n_masks, sparsity):
    """Directory name of a search: the method and every parameter that changes its result."""
    tail = f"n{id_docs(task)}_s{SEARCH['seed']}"
    if method == "greedy1s":
        return f"greedy1s_{tail}"
    if method == "greedy":
        return f"greedy_k{TOP_K}_{tail}"
    return f"{method}_m{n_masks}_p{sparsity:g}_{tail}"


def plan_searches():
    """task -> {search id: settings} for the searches whose heads are validated (the paper's
    methods), and task -> {search id: settings} for the tuning grid of appendix A.1."""
    main, tuning = {}, {}
    for task in LOCALIZED:
        settings = search_settings(task)
        main[task] = {}
        for method in settings["methods"]:
            spec = {
                "method": method,
                "n_masks": settings["n_masks"],
                "sparsity": settings["sparsity"],
            }
            main[task][search_id(task, **spec)] = spec
    for task in config["tuning"]["tasks"]:
        tuning[task] = {}
        for n_masks in config["tuning"]["n_masks"]:
            for sparsity in config["tuning"]["sparsity"]:
                spec = {
                    "method": config["tuning"]["method"],
                    "n_masks": n_masks,
                    "sparsity": sparsity,
                }
                tuning[task][search_id(task, **spec)] = spec
    return main, tuning


SEARCHES, TUNING = plan_searches()
SEARCH_SPECS = {
    (task, search): spec
    for plan in (SEARCHES, TUNING)
    for task, searches in plan.items()
    for search, spec in searches.items()
}


def main_search(task):
    """The search of the main method (validation.method) on a task."""
    for search, spec in SEARCHES[task].items():
        if spec["method"] == MAIN_METHOD:
            return search
    raise ValueError(
        f"config validation.method: {MAIN_METHOD!r} is not among the methods run on task {task!r} "
        f"({', '.join(spec['method'] for spec in SEARCHES[task].values())})"
    )


def alternatives(names):
    return "|".join(re.escape(name) for name in sorted(names)) or "(?!)"


wildcard_constraints:
    model=alternatives(MODELS),
    task=alternatives(TASKS),
    search=alternatives({search for _, search in SEARCH_SPECS}),
    chunk=r"\d+",
    round=r"\d+",
    n=r"\d+",
    seed=r"\d+",
    headset=HEADSET_PATTERN,


# ---------------------------------------------------------------- models


def get_model_input(wildcards):
    """The prepared checkpoint folder, for models that need preparation (GGUF); else nothing."""
    if SOURCES[wildcards.model].needs_preparation:
        return f"results/models/{wildcards.model}"
    return []


def gguf_file(wildcards):
    return SOURCES[wildcards.model].location


def model_location(wildcards):
    """What transformers loads: the prepared folder, a local directory or a hub id."""
    source = SOURCES[wildcards.model]
    return (
        f"results/models/{wildcards.model}"
        if source.needs_preparation
        else source.location
    )


def model_options(wildcards):
    spec = config["models"][wildcards.model]
    return {
        key: spec[key] for key in ("dtype", "device", "batch_size", "masks_per_pass")
    }


# ---------------------------------------------------------------- data and tasks


def dataset_options(wildcards):
    spec = config["tasks"][wildcards.task]
    return {
        "dataset": spec.get("dataset", wildcards.task),
        "data_file": spec.get("data_file"),
        "n_docs": spec["n_docs"],
        "seed": SEARCH["seed"],
        "mirror": MIRROR,
    }


def options_of_task(task):
    """Everything an evaluation job needs to build the lm-eval task (data file added by the job).

    Every loader accepts the data options (mirror, code execution) and ignores what it does not use.
    """
    spec = config["tasks"][task]
    data = {"mirror": MIRROR, "allow_code_execution": DATA["allow_code_execution"]}
    return {
        "lm_eval_task": spec["lm_eval_task"],
        "metric": spec["metric"],
        "chat": spec["chat"],
        "dataset_kwargs": {**data, **spec["dataset_kwargs"]},
    }


def task_options(wildcards):
    return options_of_task(wildcards.task)


def all_task_options(wildcards):
    """Task options of every task, in the order of TASKS (and of validate_headset's outputs)."""
    return [options_of_task(task) for task in TASKS]


def get_id_subset(wildcards):
    return f"results/data/{wildcards.task}/id_{id_docs(wildcards.task)}_seed{SEARCH['seed']}.jsonl"


# ---------------------------------------------------------------- search


def search_spec(wildcards):
    return SEARCH_SPECS[(wildcards.task, wildcards.search)]


def search_method(wildcards):
    return search_spec(wildcards)["method"]


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
    """Compressed sensing and one-shot greedy: the masks and their scores; greedy: its last round."""
    if search_method(wildcards) == "greedy":
        return {
            "rounds": expand(
                "results/{model}/{task}/{search}/round{round}/chosen.json",
                round=range(1, TOP_K + 1),
                **wildcards,
            )
        }
    return {
        "masks": "results/{model}/{task}/{search}/masks.npy".format(**wildcards),
        "scores": get_chunk_scores(wildcards),
    }


def recovery_file(model, task, search):
    return f"results/{model}/{task}/{search}/recovery.json"


def main_recovery_files(wildcards):
    """The main method's recovery of every searched task of one model (universal heads)."""
    return [
        recovery_file(wildcards.model, task, main_search(task)) for task in LOCALIZED
    ]


# ---------------------------------------------------------------- head sets to validate


def ranking(model, task, search):
    """Recovered ranking of a finished search (waits for the recover_heads checkpoint)."""
    recovery = checkpoints.recover_heads.get(
        model=model, task=task, search=search
    ).output[0]
    with open(recovery) as handle:
        return json.load(handle)["ranking"]


def selected_heads(model):
    """The heads every table of one model reports, by kind (see headloc.selection.select_heads)."""
    rankings = {
        (task, search): ranking(model, task, search)
        for task in LOCALIZED
        for search in SEARCHES[task]
    }
    main = {task: main_search(task) for task in LOCALIZED}
    return select_heads(
        rankings, main, CAPABILITIES, k=TOP_K, universal=UNIVERSAL, knowledge=KNOWLEDGE
    )


def headsets(model, kinds=("task", "universal", "knowledge", "extra"), methods=None):
    """Head sets to evaluate for a model: none, the cumulative top 1..k of each search (of
    `methods`, default all), each universal and knowledge head alone, and the extra sets.
    """
    selected = selected_heads(model)
    sets = {"none"}
    if "task" in kinds:
        for (task, search), heads in selected["task"].items():
            if methods is None or SEARCH_SPECS[(task, search)]["method"] in methods:
                sets.update(format_headset(heads[:k]) for k in range(1, len(heads) + 1))
    for kind in ("universal", "knowledge"):
        if kind in kinds:
            sets.update(selected[kind])
    if "extra" in kinds:
        sets.update(
            format_headset(spelling.split("+")) for spelling in VALIDATION["headsets"]
        )
    return sorted(sets)


def eval_files(model, sets):
    return expand(
        "results/{model}/evals/{task}/{headset}.json",
        model=model,
        task=TASKS,
        headset=sets,
    )


# What each evals table holds, so that one paper table waits only for the evaluations it shows.
EVAL_SCOPES = {
    "main": {"kinds": ("task",), "methods": (MAIN_METHOD,)},
    "methods": {"kinds": ("task",), "methods": None},
    "universal": {"kinds": ("universal",), "methods": None},
    "knowledge": {"kinds": ("knowledge",), "methods": None},
    "all": {"kinds": ("task", "universal", "knowledge", "extra"), "methods": None},
}


def get_scope_evals(wildcards):
    scope = EVAL_SCOPES[wildcards.scope]
    return [
        path for model in MODELS for path in eval_files(model, headsets(model, **scope))
    ]


def all_recovery_files():
    return [
        recovery_file(model, task, search)
        for model in MODELS
        for task in LOCALIZED
        for search in SEARCHES[task]
    ]


def tuning_files():
    return [
        f"results/{model}/{task}/tuning.json" for model in MODELS for task in TUNING
    ]


def get_tuning_points(wildcards):
    return expand(
        "results/{model}/{task}/{search}/id_topk.json",
        search=TUNING[wildcards.task],
        **wildcards,
    )


# ---------------------------------------------------------------- targets

TABLES = (
    {  # name -> what it shows (the rule's docstring) and the collected tables it reads
        "table1": (
            "Layers, heads per layer and total heads of every model.",
            ["models"],
        ),
        "table2": (
            "Delta Task and Delta Gen of the top-k task-specific heads.",
            ["evals_main"],
        ),
        "table3": (
            "Heads found on one dataset, evaluated on the others of its capability.",
            ["evals_main"],
        ),
        "table4": (
            "Search methods compared: Delta Task, Delta Gen and evaluations used.",
            ["evals_methods", "recoveries"],
        ),
        "table5": ("Universal heads: mean Delta per capability.", ["evals_universal"]),
        "table6": ("Degradation against the number of heads ablated.", ["evals_main"]),
        "table7": ("Universal heads: Delta on every task.", ["evals_universal"]),
        "table8": (
            "Knowledge multiple-choice heads: Delta on every task.",
            ["evals_knowledge"],
        ),
        "table9": ("Heads found by every method on every task.", ["recoveries"]),
        "table10": (
            "Heads found by the main method, per model and task.",
            ["recoveries"],
        ),
        "tuning": ("Hyperparameter search of appendix A.1.", ["tuning"]),
    }
)
FIGURES = {
    "fig1": "Every task's score with the top-k heads of one capability ablated.",
    "fig2": "Degradation against the number of heads ablated, for one capability.",
    "fig3": "Knowledge multiple-choice heads ablated alone.",
    "fig4": "Localization of the knowledge tasks (WMDP) in one model.",
}
COLLECTED = {
    "models": "results/tables/models.tsv",
    "recoveries": "results/tables/recoveries.tsv",
    "tuning": "results/tables/tuning.tsv",
    **{f"evals_{scope}": f"results/tables/evals_{scope}.tsv" for scope in EVAL_SCOPES},
}


def table_files(tables):
    return expand(
        "results/tables/{table}.{ext}", table=tables, ext=["md", "csv", "tex"]
    )


def figure_files(figures):
    return expand("results/figures/{figure}.{ext}", figure=figures, ext=["png", "pdf"])


def report_targets():
    tables = [name for name in TABLES if name != "tuning" or TUNING]
    universal = (
        expand("results/{model}/universal_heads.json", model=MODELS)
        if LOCALIZED
        else []
    )
    return (
        table_files(tables)
        + figure_files(list(FIGURES))
        + [COLLECTED["evals_all"]]
        + universal
    )


def table_inputs(wildcards):
    """The collected tables one paper table reads, by name (evals, recoveries, models, tuning)."""
    return {key.split("_")[0]: COLLECTED[key] for key in TABLES[wildcards.table][1]}


FIGURE_INPUTS = {"fig3": "evals_knowledge"}


def figure_inputs(wildcards):
    return {"evals": COLLECTED[FIGURE_INPUTS.get(wildcards.figure, "evals_main")]}


def report_params():
    """What the report functions need to know about the run."""
    searched_caps = [CAPABILITIES[task] for task in LOCALIZED]
    return {
        "top_k": TOP_K,
        "gen_tasks": GEN_TASKS,
        "method": MAIN_METHOD,
        "capabilities": CAPABILITIES,
        "knowledge_tasks": KNOWLEDGE["tasks"],
        "knowledge_eval_tasks": KNOWLEDGE["eval_tasks"],
        "figure_model": config["report"]["model"] or MODELS[0],
        "figure_capability": config["report"]["capability"]
        or (searched_caps[0] if searched_caps else None),
    }


def selection_params():
    """What headloc.results.selections needs to pick the reported heads from the recoveries."""
    return {
        "main": {task: main_search(task) for task in LOCALIZED},
        "capabilities": CAPABILITIES,
        "k": TOP_K,
        "universal": UNIVERSAL,
        "knowledge": {key: KNOWLEDGE[key] for key in ("tasks", "top_n", "min_tasks")},
        "extra": VALIDATION["headsets"],
    }
