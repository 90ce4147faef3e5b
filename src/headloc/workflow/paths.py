"""Every file target of the workflow, written once: Snakemake wildcard patterns (``{model}``,
``{task}``, ...) that the rules use as inputs and outputs and that Python fills in with
``str.format`` (or :func:`search_file`). Logs and benchmarks are named in their rule only (one
each); nothing else names a results path.

>>> search_file(RECOVERY, "m", "ioi", "greedy_k5_n20_s0")
'results/m/ioi/greedy_k5_n20_s0/recovery.json'
>>> ID_SUBSET.format(task="ioi", n=20, seed=0, ext="jsonl")
'results/data/ioi/id_20_seed0.jsonl'
"""

from headloc.methods.kinds import SearchFiles

RESULTS = "results"

# models
MODEL_DIR = f"{RESULTS}/models/{{model}}"  # a prepared (converted) checkpoint
GEOMETRY = f"{RESULTS}/{{model}}/geometry.json"
UNIVERSAL = f"{RESULTS}/{{model}}/universal_heads.json"
SINGLE_HEADS = f"{RESULTS}/{{model}}/single_heads.json"  # heads ablated alone on every task (universal.detect: damage)
# the same job's evaluation records (the unablated model's and each head's alone, every task), which
# rule validate_headset copies instead of evaluating those head sets again
SINGLE_HEAD_EVALS = f"{RESULTS}/{{model}}/single_heads.evals.json"

# documents
DOCUMENTS = f"{RESULTS}/data/{{task}}/test.jsonl"  # the full documents, copied by headloc
DOCUMENT_INDICES = f"{RESULTS}/data/{{task}}/documents.json"  # a task that reads its own documents
ID_SUBSET = f"{RESULTS}/data/{{task}}/id_{{n}}_seed{{seed}}.{{ext}}"  # ext: jsonl (copied) or json (indices)

# one search: results/<model>/<task>/<search id>/, laid out as every search's folder is (the driver's
# too): headloc.methods.kinds.SearchFiles; a stage is a sub-folder (stage2, round<r>)
SEARCH = f"{RESULTS}/{{model}}/{{task}}/{{search}}"
_IN_SEARCH = SearchFiles(SEARCH)
MASKS = _IN_SEARCH.masks()
SCORES = _IN_SEARCH.score_table(chunk="{chunk}")
SAMPLES = _IN_SEARCH.samples(chunk="{chunk}")
STAGE2_MASKS = _IN_SEARCH.masks("stage2")
STAGE2_SCORES = _IN_SEARCH.score_table("stage2", "{chunk}")
STAGE2_SAMPLES = _IN_SEARCH.samples("stage2", "{chunk}")
REFINEMENT = _IN_SEARCH.refinement()
ROUND_MASKS = _IN_SEARCH.masks("round{round}")
ROUND_SCORES = _IN_SEARCH.score_table("round{round}", "{chunk}")
ROUND_SAMPLES = _IN_SEARCH.samples("round{round}", "{chunk}")
CHOSEN = _IN_SEARCH.chosen("{round}")
# a one-job search's result, named by its method's kind (gradient.json, sequential.json, guided.json);
# its record (record.npz, headloc.methods.record) lies beside it and is no rule's output
ONE_JOB_RESULT = _IN_SEARCH.result("{kind}")
RECOVERY = f"{SEARCH}/recovery.json"
HEATMAP = f"{SEARCH}/heatmap.png"
ID_TOPK = f"{SEARCH}/id_topk.json"
TUNING = f"{RESULTS}/{{model}}/{{task}}/tuning.json"

# full-data validation: one file per (model, task, head set)
EVAL = f"{RESULTS}/{{model}}/evals/{{task}}/{{headset}}.json"

# collected tables of one config (under its digest), their published copies, tables and figures
RUN = f"{RESULTS}/runs/{{digest}}"
RUN_CONFIG = f"{RUN}/config.yaml"
COLLECTED = f"{RUN}/{{collection}}.tsv"
PUBLISHED = f"{RESULTS}/tables/{{name}}.tsv"
TABLE = f"{RESULTS}/tables/{{table}}.{{ext}}"
FIGURE = f"{RESULTS}/figures/{{figure}}.{{ext}}"


def search_file(pattern: str, model: str, task: str, search: str, **more) -> str:
    """A per-search pattern filled in for one search (``more``: its chunk, round, ...)."""
    return pattern.format(model=model, task=task, search=search, **more)

# Every search's per-head values for other tools (rule export, headloc.report.export): the tidy
# CSV, and one MIB submission folder (<task>_<model>/importances.json and the sidecar headloc.tsv)
EXPORT_CSV = f"{RESULTS}/exports/heads.csv"
EXPORT_MIB = f"{RESULTS}/exports/mib"

# planted-head models (their own workflow, ground_truth.smk)
PLANTED = f"{RESULTS}/planted/{{planted}}"
PLANTED_MODEL = f"{PLANTED}/model"  # checkpoint, tokenizer, tasks/, planted.json
PLANTED_TRUTH = f"{PLANTED}/truth.json"
PLANTED_SUMMARY = f"{PLANTED}/truth.md"
