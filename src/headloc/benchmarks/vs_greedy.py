"""Every search method against greedy on a task's full data (benchmarks/smollm2_vs_greedy.py).

For a task and a seed it does what the workflow does with ``search.seed`` = that seed: the task's
full data (its ``n_docs``, generated with the seed), the identification subset (``search.id_docs``
documents drawn with the seed, :func:`identification_ids`), every method searching that subset
through :func:`headloc.locate` (one loaded model), then the top ``k`` heads of every search ablated
on the full data and scored with the task's validation metric, the unablated model beside it:
Delta Task in percentage points, as Table 2. Where the task has a continuous identification score
(``id_task``, ``id_metric``: the ioi margin, a log-likelihood), the top k is scored by it on the
full data too: it does not saturate at 5 heads, so it tells methods apart where accuracy reaches
its floor. Greedy and one-shot greedy run on the same subset, so each seed compares every method
with them on one yardstick.

Each search, with its validation, is appended to ``<out>/<task>-s<seed>.jsonl`` as soon as it ends
(:func:`append_record`): a killed run keeps what it finished, and a rerun skips it.
:func:`read_records` reads them back for the table (:func:`headloc.report.comparison.vs_greedy_table`).

``universal`` names heads to leave out of a second top k, validated beside the first: what the
workflow's tables show with ``universal.filter`` on and those heads given as ``universal.heads``
(greedy's rounds, which the workflow runs without them, are not rerun so here: its filtered top k
is the tail of its own rounds). ``options`` passes a sequential method's options (e.g.
``{"extra_heads": 0}``), ``label_suffix`` names such a variant in the records.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headloc.heads import TOP_K

METHODS = ("group_testing", "cs_adaptive", "cs_stratified", "greedy1s", "greedy", "random")


@dataclass(frozen=True)
class Comparison:
    """What every search of a comparison shares."""

    methods: tuple = METHODS
    budget: int = 100  # masks of a budgeted method
    top_k: int = TOP_K
    universal: tuple = ()  # heads left out of the second, filtered top k
    options: dict | None = None  # a sequential method's options
    label_suffix: str = ""  # appended to the method's name in the records
    batch_size: int = 128  # rows per forward pass
    masks_per_pass: int = 8


def demo_checkpoint(repo) -> Path:
    """The benchmarks' default model: config/demo.yaml's model where the workflow converts it
    (:data:`headloc.workflow.paths.MODEL_DIR`), else the tests' copy (``results/test-cache/<source>``),
    converted from the embedded GGUF into the latter when neither holds a checkpoint."""
    import yaml

    from headloc.model.loading import converted_checkpoint
    from headloc.workflow.paths import MODEL_DIR

    repo = Path(repo)
    ((model, spec),) = yaml.safe_load((repo / "config" / "demo.yaml").read_text())["models"].items()
    folders = [repo / MODEL_DIR.format(model=model), repo / "results" / "test-cache" / spec["source"]]
    return converted_checkpoint(folders, spec["source"])


def read_config(path: Path, repo: Path) -> dict:
    """A workflow config as the workflow reads it: the schema's defaults filled in (a task's
    ``relative``), its errors raised."""
    import yaml

    from headloc.workflow.schema import validate_config

    config = yaml.safe_load(Path(path).read_text())
    validate_config(config, repo / "config" / "schema.yaml")
    return config


def identification_ids(n_full: int, n: int, seed: int) -> list[int]:
    """The indices of the documents rule subset_dataset keeps, by its own draw."""
    from headloc.data.datasets import identification_subset

    return identification_subset(list(range(n_full)), n, seed)


def identification_documents(task: dict, search: dict, seed: int) -> tuple[list[int], dict, int]:
    """For a config task at ``seed``: the documents of the identification subset (:func:`identification_ids`),
    the data options that generate the task's full data, and how many documents that holds."""
    from headloc.api.tasks import count_documents, resolve_task

    data = {"n_docs": task.get("n_docs"), "seed": seed}
    n_full = count_documents(resolve_task(task["lm_eval_task"], dataset_kwargs=data))
    return identification_ids(n_full, search["id_docs"], seed), data, n_full


def finished(record: Path) -> dict[str, dict]:
    """Each method (label) with a validation record in ``record`` (a ``<task>-s<seed>.jsonl``): that record."""
    return {row["method"]: row for row in _read(record) if row["kind"] == "validation"}


def read_records(folders) -> list[dict]:
    """Every record of every ``*.jsonl`` under ``folders`` (in file-name order)."""
    return [row for folder in folders for path in sorted(Path(folder).glob("*.jsonl")) for row in _read(path)]


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def append_record(path: Path, row: dict) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def compare(model, tokenizer, config: dict, out: Path, settings: Comparison, *, tasks=None, seeds=(0,),
            log=print) -> None:
    """Every method's search of each of ``config``'s tasks (a workflow config with the schema's
    defaults filled in: its ``tasks`` and ``search`` sections; ``tasks`` picks some) at each seed,
    records under ``out``."""
    unknown = sorted(set(tasks or ()) - set(config["tasks"]))
    if unknown:
        raise ValueError(f"tasks {unknown} are not in the config; expected some of {sorted(config['tasks'])}")
    out.mkdir(parents=True, exist_ok=True)
    for name in tasks or list(config["tasks"]):
        for seed in seeds:
            compare_seed(model, tokenizer, name, config["tasks"][name], config["search"], seed, out, settings, log=log)


def compare_seed(model, tokenizer, name: str, task: dict, search: dict, seed: int, out: Path,
                 settings: Comparison, log=print) -> None:
    """Every method's search of ``name`` at ``seed``, each one's top k validated on the full data as
    soon as it is found (a record line each); methods with a validation record already are skipped."""
    from headloc import methods
    from headloc.api import locate
    from headloc.heads import HeadGeometry

    record = out / f"{name}-s{seed}.jsonl"
    done = finished(record)
    ids, data, n_full = identification_documents(task, search, seed)
    validate, metric = validators(model, tokenizer, task, data, settings)
    for method in settings.methods:
        label = method + settings.label_suffix
        if label in done:
            continue
        spec = methods.get(method)
        started = time.perf_counter()
        found = locate(model, tokenizer, task.get("id_task") or task["lm_eval_task"], method=method,
                       budget=settings.budget if spec.budgeted else None, top_k=settings.top_k, seed=seed,
                       sparsity=search["sparsity"], alpha=search["alpha"], documents=ids,
                       metric=task.get("id_metric"), dataset_kwargs=data, batch_size=settings.batch_size,
                       masks_per_pass=settings.masks_per_pass, progress=False,
                       options=settings.options if spec.options else None)
        row = validation_record(Searched.of(found), validate, HeadGeometry.of(model.config), task=name, seed=seed, label=label,
                                n_docs=n_full, seconds=time.perf_counter() - started, settings=settings,
                                metric=metric, relative=task["relative"], id_metric=task.get("id_metric"))
        append_record(record, row)
        log(summary_line(row))


def validators(model, tokenizer, task: dict, data: dict, settings: Comparison) -> tuple[list, str]:
    """The full data's scorers: the task's validation metric, and its continuous identification
    score where it has one (``id_task``); and the validation metric's key (as the task declares it)."""
    from headloc.api.tasks import mask_scorer, resolve_task

    tasks = [resolve_task(task["lm_eval_task"], dataset_kwargs=data)]
    if task.get("id_task"):
        tasks.append(resolve_task(task["id_task"], metric=task.get("id_metric"), dataset_kwargs=data))
    return [mask_scorer(t, model, tokenizer, batch_size=settings.batch_size, masks_per_pass=3, progress=False)
            for t in tasks], tasks[0].spec.metric_key


@dataclass(frozen=True)
class Searched:
    """What a validation reads of a search: its ranking, its evaluations, each head's label and the
    heads its details name by what they are (screened greedy's ``pair``, ``displaced``, ...) with its
    pair probes."""

    ranking: list
    n_evals: int
    labels: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    @classmethod
    def of(cls, found) -> Searched:
        """From a :class:`headloc.api.Located`: of its record's details, the lists of head names and
        the pair probes (not the steps' measurements)."""
        details = {key: value for key, value in found.record.get("details", {}).items()
                   if key == "probes" or isinstance(value, list) and all(isinstance(head, str) for head in value)}
        return cls(list(found.ranking), found.n_evals, dict(found.record.get("labels", {})), details)


def validation_record(found: Searched, validate: list, geometry, *, task: str, seed: int, label: str, n_docs: int,
                      seconds: float, settings: Comparison, metric: str, relative: bool = False,
                      id_metric: str | None = None) -> dict:
    """One search's record: its top k, and its top k without the universal heads, ablated on the
    full data by each of ``validate``
    (:func:`validators`), the unablated model beside them (one call each: masks unablated, top k,
    filtered top k; ``geometry``: the model's :class:`headloc.heads.HeadGeometry`); ``metric``: the
    validation metric's key, and ``unit`` the tables show it in (:func:`headloc.data.units.display_unit`
    of it, ``relative`` where the config's task is)."""
    from headloc.data.units import display_unit
    from headloc.heads import headset_mask

    top = found.ranking[: settings.top_k]
    filtered = [head for head in found.ranking if head not in settings.universal][: settings.top_k]
    masks = np.vstack([np.zeros(geometry.total, dtype=np.int8)]
                      + [headset_mask(heads, geometry.n_layers, geometry.n_heads).reshape(-1)
                         for heads in (top, filtered)])
    clean, ablated, filtered_ablated = (float(v) for v in validate[0](masks, desc=f"validate {task}"))
    row = {"kind": "validation", "task": task, "seed": seed, "method": label, "top": top,
           "n_evals": found.n_evals, "seconds": seconds, "n_docs": n_docs, "clean": clean, "ablated": ablated,
           "universal": list(settings.universal), "filtered_top": filtered, "filtered_ablated": filtered_ablated,
           "labels": [found.labels.get(head, "") for head in filtered],
           "top_labels": [found.labels.get(head, "") for head in top], "details": found.details}
    row["metric"], row["unit"] = metric, display_unit(metric, relative=relative)
    if len(validate) > 1:
        row["id_clean"], row["id_ablated"], row["id_filtered_ablated"] = (
            float(v) for v in validate[1](masks, desc=f"validate {task} ({id_metric})"))
        row["id_metric"] = id_metric
    return row


def summary_line(row: dict) -> str:
    from headloc.data.units import change

    delta = change(row["ablated"], row["clean"], row["unit"])
    without = change(row["filtered_ablated"], row["clean"], row["unit"])
    return (f"{row['task']} s{row['seed']} {row['method']}: {row['n_evals']} evals, {row['seconds']:.1f} s, top "
            f"{row['top']}, Delta Task {delta:+.1f} on {row['n_docs']} documents; without {row['universal']}: "
            f"{row['filtered_top']} {without:+.1f}")

