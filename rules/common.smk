"""Config validation, wildcard constraints and every input function of the workflow."""

import json
import re

from snakemake.utils import validate

from headloc.config import check_config, model_geometries
from headloc.heads import HEADSET_PATTERN, format_headset
from headloc.models import resolve_source

validate(config, schema="../config/schema.yaml", set_default=True)
check_config(config, model_geometries(config))

MODELS = list(config["models"])
TASKS = list(config["tasks"])
SEARCH = config["search"]
TOP_K = config["validation"]["top_k"]
GEN_TASKS = config["validation"]["gen_tasks"]


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


def id_docs(task):
    """Identification subset size: the task's own, or the search default."""
    return config["tasks"][task]["id_docs"] or SEARCH["id_docs"]


def search_id(task, method):
    """Directory name of a search: the method and every parameter that changes its result."""
    tail = f"n{id_docs(task)}_s{SEARCH['seed']}"
    if method == "greedy1s":
        return f"greedy1s_{tail}"
    return f"{method}_m{SEARCH['n_masks']}_p{SEARCH['sparsity']:g}_{tail}"


# task -> {search id: method}
SEARCHES = {
    task: {search_id(task, method): method for method in SEARCH["methods"]}
    for task in TASKS
}


def alternatives(names):
    return "|".join(re.escape(name) for name in names)


wildcard_constraints:
    model=alternatives(MODELS),
    task=alternatives(TASKS),
    search=alternatives(sorted(set().union(*SEARCHES.values()))),
    chunk=r"\d+",
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
    return {key: spec[key] for key in ("dtype", "device", "batch_size")}


# ---------------------------------------------------------------- data and tasks


def dataset_options(wildcards):
    spec = config["tasks"][wildcards.task]
    return {
        "dataset": spec.get("dataset", wildcards.task),
        "data_file": spec.get("data_file"),
        "n_docs": spec["n_docs"],
        "seed": SEARCH["seed"],
    }


def options_of_task(task):
    """Everything an evaluation job needs to build the lm-eval task (data file added by the job)."""
    spec = config["tasks"][task]
    return {
        "lm_eval_task": spec["lm_eval_task"],
        "metric": spec["metric"],
        "chat": spec["chat"],
        "dataset_kwargs": dict(spec["dataset_kwargs"]),
    }


def task_options(wildcards):
    return options_of_task(wildcards.task)


def all_task_options(wildcards):
    """Task options of every task, in the order of TASKS (and of validate_headset's outputs)."""
    return [options_of_task(task) for task in TASKS]


def get_id_subset(wildcards):
    return f"results/data/{wildcards.task}/id_{id_docs(wildcards.task)}_seed{SEARCH['seed']}.jsonl"


# ---------------------------------------------------------------- search


def search_method(wildcards):
    return SEARCHES[wildcards.task][wildcards.search]


def get_chunk_scores(wildcards):
    return expand(
        "results/{model}/{task}/{search}/scores/{chunk}.tsv",
        chunk=range(SEARCH["chunks"]),
        **wildcards,
    )


def recovery_files():
    return [
        f"results/{model}/{task}/{search}/recovery.json"
        for model in MODELS
        for task in TASKS
        for search in SEARCHES[task]
    ]


# ---------------------------------------------------------------- validation


def top_heads(model, task, search):
    """Recovered ranking of a finished search (waits for the recover_heads checkpoint)."""
    recovery = checkpoints.recover_heads.get(
        model=model, task=task, search=search
    ).output[0]
    with open(recovery) as handle:
        return json.load(handle)["top_heads"]


def headsets(model):
    """Every head set a model's tables need: none, and the top 1..k of every search."""
    sets = {"none"}
    for task in TASKS:
        for search in SEARCHES[task]:
            heads = top_heads(model, task, search)
            sets.update(format_headset(heads[:k]) for k in range(1, len(heads) + 1))
    return sorted(sets)


def get_all_evals(wildcards):
    """Full-dataset evaluations of every head set on every task, for every model."""
    return [
        path
        for model in MODELS
        for path in expand(
            "results/{model}/evals/{task}/{headset}.json",
            model=model,
            task=TASKS,
            headset=headsets(model),
        )
    ]


# ---------------------------------------------------------------- targets

TABLES = ["table2", "table6", "table10"]
FIGURES = ["fig2"]


def table_files(tables):
    return expand(
        "results/tables/{table}.{ext}", table=tables, ext=["md", "csv", "tex"]
    )


def figure_files(figures):
    return expand("results/figures/{figure}.{ext}", figure=figures, ext=["png", "pdf"])


def report_targets():
    return table_files(TABLES) + figure_files(FIGURES)
