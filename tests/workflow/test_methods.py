"""Methods on trial as a workflow: every search method side by side on a tiny random Llama, and
Snakemake's HTML report of that run.

One real run (the `all`, `table4`, `methods` and `heatmaps` targets on a tiny random Llama of 2
layers x 4 heads, two tasks of two capabilities, the universal filter on, budgets and repeats, then
`snakemake --report`). Expectations are recomputed here from the run's own files (masks, chunk
scores, evaluations) and a plain transformers forward pass, not from the methods' code:

- mask methods: greedy leaves the universal heads out of its rounds, one-shot greedy reuses
  greedy's round 1, smaller budgets read the first rows of the full design, repeats draw new
  designs, cs_adaptive screens then refines, and Table 4 carries the recall of greedy's top k and
  the unfiltered deltas;
- gradient methods (attribution, chg): rule search_job writes gradient.json, the recover_heads
  checkpoint turns it into recovery.json in the format of the other methods, Table 9 lists every
  search;
- one GPU per job: the run is given three (fake) GPUs and three evaluating jobs at a time; each
  job's own log says which GPU it claimed and when it ran;
- the report is a single page whose results are an embedded JSON object (`var results = {...};`:
  path -> name, labels, caption HTML, mime type and the file as a base64 data URI), read back and
  compared with the run's files and headloc's own registry of tables and figures.
"""

import base64
import html
import json
import math
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import CORES, snakemake
from headloc import methods
from headloc.methods import make_masks
from headloc.report import FIGURES, TABLES

N_MASKS, BUDGET, REPEATS, TOP_K, ID_DOCS = 8, 6, 2, 2, 4
CHG = {"seeds": 2, "lam": 0.1, "steps": 6}
GROUP_TESTING = {"group_size": 2}  # 4 groups of 8 heads: the baseline and a partition fit the budget of 6
# ioi is searched by every method; induction by the mask methods that need no gradients
IOI_METHODS = ["cs_stratified", "greedy1s", "greedy", "cs_adaptive", "attribution", "chg", "random", "group_testing",
               "thompson", "guided_greedy", "screened_greedy"]
METHODS = ["cs_stratified", "greedy1s", "greedy"]
TASKS = ("ioi", "induction")
BATCH_SIZE = 8


def methods_config(model_dir) -> dict:
    return {
        "models": {"tiny": {"source": str(model_dir), "batch_size": BATCH_SIZE}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 6, "search": {"methods": IOI_METHODS}},
                  "induction": {"lm_eval_task": "headloc_induction", "n_docs": 6}},
        "search": {"methods": METHODS, "n_masks": N_MASKS, "budgets": [BUDGET], "repeats": REPEATS,
                   "sparsity": 0.25, "id_docs": ID_DOCS, "chunks": 1, "alpha": 0.001},
        "chg": CHG,
        "group_testing": GROUP_TESTING,
        "validation": {"top_k": TOP_K},
        # top 5 of 8 heads on each of two tasks: at least two heads are universal
        "universal": {"detect": "ranking", "top_n": 5, "min_capabilities": 2, "filter": True},
    }


HEADS = [f"L{layer}H{head}" for layer in range(2) for head in range(4)]
GREEDY, ONE_SHOT = f"greedy_k{TOP_K}_xu_n{ID_DOCS}_s0", f"greedy1s_n{ID_DOCS}_s0"
DRAWS = {"random_s0": 0, "random_s0_r1": 1}  # search id: seed (search.seed + repeat)
GRADIENT = {f"attribution_n{ID_DOCS}_s0", f"chg_x{CHG['seeds']}_l{CHG['lam']:g}_t{CHG['steps']}_n{ID_DOCS}_s0"}
SEQUENTIAL = {f"{method}_m{budget}{middle}_n{ID_DOCS}_s0{f'_r{repeat}' if repeat else ''}": (method, budget, repeat)
              for method, middle in (("group_testing", f"_k{TOP_K}_g2_per1_x2"), ("thompson", "_p0.25_score"))
              for budget in (BUDGET, N_MASKS) for repeat in range(REPEATS)}
GUIDED = f"guided_greedy_k{TOP_K}_l10_a10_c0_n{ID_DOCS}_s0"
SCREENED = f"screened_greedy_k{TOP_K}_l10_a10_g3_p4_h2_f3_d3_n{ID_DOCS}_s0"
SCREENED_RUNS = {SCREENED + (f"_r{repeat}" if repeat else "") for repeat in range(REPEATS)}  # drawn again per repeat
SEARCHES = {"cs_stratified": f"cs_stratified_m{N_MASKS}_p0.25_n{ID_DOCS}_s0",
            "attribution": f"attribution_n{ID_DOCS}_s0",
            "chg": f"chg_x{CHG['seeds']}_l{CHG['lam']:g}_t{CHG['steps']}_n{ID_DOCS}_s0"}


def cs(method, budget=N_MASKS, repeat=0):
    nested = budget != N_MASKS and method != "cs_adaptive"
    size = f"{budget}of{N_MASKS}" if nested else f"{budget}"
    return f"{method}_m{size}_p0.25_n{ID_DOCS}_s0" + (f"_r{repeat}" if repeat else "")


def read_json(path):
    return json.loads(Path(path).read_text())


def chunk_scores(folder):
    scores = pd.concat(pd.read_csv(p, sep="\t") for p in sorted(Path(folder).glob("scores/*.tsv")))
    return scores.sort_values("mask")["score"].to_numpy()


pytestmark = pytest.mark.slow


FAKE_GPUS = "0,1,2"  # this machine has no CUDA: the ids only name the jobs' lock files


@pytest.fixture(scope="module")
def methods_run(tmp_path_factory, tiny_model_dir):
    """The run's working directory: every table, figure and heatmap, then the HTML report. Run as
    on a machine of three GPUs: three evaluating jobs at a time, each claiming one of them."""
    work = tmp_path_factory.mktemp("methods")
    (work / "config.yaml").write_text(yaml.safe_dump(methods_config(tiny_model_dir)))
    common = ("--directory", str(work), "--configfile", str(work / "config.yaml"))
    with pytest.MonkeyPatch.context() as patch:  # the environment the Snakemake runs inherit
        patch.setenv("CUDA_VISIBLE_DEVICES", FAKE_GPUS)
        patch.setenv("HEADLOC_GPU_LOCKS", str(work / "gpu-locks"))  # no other run's jobs
        snakemake("all", "table4", "methods", "heatmaps", "export", "--cores", "3", "--resources", "gpu=3",
                  *common)
        snakemake("all", "table4", "methods", "heatmaps", "--report", str(work / "report.html"), *common)
    return work


@pytest.fixture(scope="module")
def results(methods_run):
    return methods_run / "results"


def test_greedy_leaves_universal_heads_out_of_its_rounds(results):
    universal = read_json(results / "tiny" / "universal_heads.json")["heads"]
    assert len(universal) >= 2  # two top 5s of 8 heads share at least two
    excluded = [HEADS.index(h) for h in universal]
    for task in TASKS:
        folder = results / "tiny" / task / GREEDY
        round1 = np.load(folder / "round1" / "masks.npy")
        assert np.array_equal(round1, np.vstack([np.zeros(8, dtype=np.int8), np.eye(8, dtype=np.int8)]))
        chosen, before = [], None
        for r in range(1, TOP_K + 1):
            masks, scores = np.load(folder / f"round{r}" / "masks.npy"), chunk_scores(folder / f"round{r}")
            if r > 1:
                assert not masks[:, excluded].any()  # later rounds never ablate a universal head
            rows = masks[1:] if r == 1 else masks
            values = scores[1:] if r == 1 else scores
            added = [int(np.flatnonzero(row & ~np.isin(np.arange(8), chosen))[0]) for row in rows]
            allowed = [(v, h) for v, h in zip(values, added) if h not in excluded and h not in chosen]
            best = min(allowed)[1]  # lowest score, ties to the lower head
            chosen.append(best)
            record = read_json(folder / f"round{r}" / "chosen.json")
            assert record["chosen"] == [HEADS[h] for h in chosen]
        recovery = read_json(folder / "recovery.json")
        assert recovery["ranking"][:TOP_K] == [HEADS[h] for h in chosen]
        assert not set(recovery["ranking"][:TOP_K]) & set(universal)
        assert recovery["n_evals"] == 9 + sum(8 - len(excluded) - r for r in range(1, TOP_K))


def test_one_shot_greedy_is_greedys_round_one(results):
    for task in TASKS:
        round1 = results / "tiny" / task / GREEDY / "round1"
        scores = chunk_scores(round1)
        one_shot = read_json(results / "tiny" / task / ONE_SHOT / "recovery.json")
        assert one_shot["n_evals"] == 9
        assert not (results / "tiny" / task / ONE_SHOT / "masks.npy").exists()  # nothing scored twice
        effects = {HEADS[h]: scores[1 + h] - scores[0] for h in range(8)}
        assert one_shot["coef"] == pytest.approx(effects)


def test_budgets_are_nested_and_repeats_draw_new_designs(results):
    from headloc.search.recovery import LassoRecovery

    for method in ("cs_stratified",):  # cs_bernoulli takes the same path (its id and masks differ)
        for repeat in (0, 1):
            full = results / "tiny" / "ioi" / cs(method, repeat=repeat)
            masks = np.load(full / "masks.npy")
            assert np.array_equal(masks, make_masks(8, N_MASKS, method=method, sparsity=0.25, random_state=repeat))
            nested = results / "tiny" / "ioi" / cs(method, BUDGET, repeat)
            assert not (nested / "masks.npy").exists()
            recovery = read_json(nested / "recovery.json")
            assert recovery["n_evals"] == BUDGET
            fit = LassoRecovery(alpha=0.001, random_state=repeat).fit(masks[:BUDGET],
                                                                          chunk_scores(full)[:BUDGET])
            assert recovery["coef"] == pytest.approx(dict(zip(HEADS, fit.coef_.tolist())))


def test_table4_recall_and_unfiltered_columns(results):
    table = pd.read_csv(results / "tables" / "table4.csv")
    universal = set(read_json(results / "tiny" / "universal_heads.json")["heads"])
    searches = {cs("cs_stratified", b, r) for b in (BUDGET, N_MASKS) for r in (0, 1)}
    adaptive = {cs("cs_adaptive", b, r) for b in (BUDGET, N_MASKS) for r in (0, 1)}
    for task in TASKS:
        mine = table[table["task"] == task].set_index("search")
        assert set(mine.index) == searches | {GREEDY, ONE_SHOT} | (
            adaptive | GRADIENT | set(DRAWS) | set(SEQUENTIAL) | {GUIDED} | SCREENED_RUNS if task == "ioi" else set())
        greedy_top = set(read_json(results / "tiny" / task / GREEDY / "recovery.json")["ranking"][:TOP_K])
        evals = results / "tiny" / "evals" / task
        baseline = read_json(evals / "none.json")["value"]
        for search, row in mine.iterrows():
            ranking = read_json(results / "tiny" / task / search / "recovery.json")["ranking"]
            filtered = [h for h in ranking if h not in universal][:TOP_K]
            assert row["recall"] == pytest.approx(len(set(filtered) & greedy_top) / TOP_K), search
            for heads, column in ((filtered, "delta_task"), (ranking[:TOP_K], "delta_task_unfiltered")):
                headset = "+".join(sorted(heads, key=lambda h: HEADS.index(h)))
                value = read_json(evals / f"{headset}.json")["value"]
                assert row[column] == pytest.approx(100 * (value - baseline), abs=1e-6), (search, column)
    assert (results / "figures" / "methods.png").read_bytes().startswith(b"\x89PNG")
    assert (results / "figures" / "methods.pdf").read_bytes().startswith(b"%PDF")
    # one panel per (model, task) of Table 4
    log = (results / "logs" / "render_figure" / "methods.log").read_text()
    assert f"methods with {len(TASKS)} panels" in log, log


def test_adaptive_searches_screen_then_refine(results):
    from headloc.search.adaptive import SETTLED, stage_sizes
    from headloc.search.recovery import LassoRecovery

    refined = []
    for budget in (BUDGET, N_MASKS):
        for repeat in (0, 1):
            folder = results / "tiny" / "ioi" / cs("cs_adaptive", budget, repeat)
            stage1, stage2 = np.load(folder / "masks.npy"), np.load(folder / "stage2" / "masks.npy")
            assert np.array_equal(stage1, make_masks(8, budget, method="cs_adaptive", sparsity=0.25,
                                                     random_state=repeat))
            assert len(stage1) == stage_sizes(budget)[0]
            plan = read_json(folder / "stage2" / "refinement.json")
            # the stop rule: settled exactly when every head of stage 1's own top k keeps its place
            # in at least SETTLED of the bootstrap refits
            screen = LassoRecovery(alpha=0.001, random_state=repeat).fit(stage1, chunk_scores(folder))
            probability = [plan["top_k_probability"][HEADS[h]] for h in screen.ranking_[:TOP_K]]
            assert plan["settled"] == all(q >= SETTLED for q in probability), (folder.name, probability)
            if plan["settled"]:
                assert len(stage2) == 0
            else:
                refined.append(folder.name)
                assert len(stage2) == stage_sizes(budget)[1]
                outside = [HEADS.index(h) for h in HEADS if h not in plan["candidates"]]
                assert not stage2[:, outside].any()  # stage 2 ablates candidates only
                assert stage2[:, [HEADS.index(h) for h in plan["candidates"]]].any(axis=0).any()
            recovery = read_json(folder / "recovery.json")
            assert recovery["n_evals"] == len(stage1) + len(stage2)
            y = np.concatenate([chunk_scores(folder), chunk_scores(folder / "stage2")])
            fit = LassoRecovery(alpha=0.001, random_state=repeat).fit(np.vstack([stage1, stage2]), y)
            assert recovery["coef"] == pytest.approx(dict(zip(HEADS, fit.coef_.tolist())))
    assert refined, "no adaptive search of the run refined: its stage-2 path went untested"


def test_random_draws_evaluate_nothing_and_sit_in_table4(results):
    table = pd.read_csv(results / "tables" / "table4.csv").set_index("search")
    for search, seed in DRAWS.items():
        folder = results / "tiny" / "ioi" / search
        found = read_json(folder / "recovery.json")
        # numpy's seeded permutation, as the baseline promises: recomputed here, not read from its code
        assert found["ranking"] == [HEADS[i] for i in np.random.default_rng(seed).permutation(8)]
        assert found["n_evals"] == 0 and set(found["coef"].values()) == {None}
        assert sorted(p.name for p in folder.iterdir()) == ["heatmap.png", "recovery.json"]  # nothing scored
        assert table.loc[search, "method"] == "random" and table.loc[search, "n_evals"] == 0
    assert read_json(results / "tiny" / "ioi" / "random_s0" / "recovery.json")["ranking"] != \
        read_json(results / "tiny" / "ioi" / "random_s0_r1" / "recovery.json")["ranking"]


def test_sequential_searches_resume_from_a_record_and_recover_like_the_others(results):
    """group_testing and thompson: one search_job job each, its record (every scored mask
    once, the unablated row first), its result turned into recovery.json by recover_heads."""
    from headloc.methods import get
    from headloc.methods.kinds.sequential import SequentialParams

    for search, (method, budget, repeat) in SEQUENTIAL.items():
        folder = results / "tiny" / "ioi" / search
        found = read_json(folder / "recovery.json")
        assert (found["method"], found["search"]) == (method, search)
        assert sorted(found["ranking"]) == sorted(HEADS) and sorted(found["labels"]) == sorted(HEADS)
        assert found["top_heads"] == found["ranking"][:TOP_K]
        with np.load(folder / "record.npz") as record:
            masks, scores = record["masks"], record["scores"]
        assert not masks[0].any() and len({row.tobytes() for row in masks}) == len(masks)
        assert found["n_evals"] == len(masks) <= budget
        assert found["intercept"] == pytest.approx(scores[0])  # the unablated score
        # the search replayed on its record: finished, and the same ranking
        options = get(method).options_of(GROUP_TESTING if method == "group_testing" else {})
        params = SequentialParams(method, budget, repeat, TOP_K, 0.25, options)
        replayed = get(method).algorithm(8, params).recover(masks, scores)
        assert found["ranking"] == [HEADS[i] for i in replayed.ranking]
        log = results / "logs" / "sequential_search" / "tiny" / "ioi" / f"{search}.log"
        assert f"done after {len(masks)} masks ({len(masks)} scored in this run)" in log.read_text()


def test_the_guided_search_records_what_it_scored_and_chose_greedily_from_it(results):
    """guided_greedy: one search_job job, its record (every head set it scored once, with its raw
    score, and each gradient beside the heads chosen before it), recovery.json read back against
    it: each chosen head the lowest-scoring of its step's listed sets, its value its measured change."""
    folder = results / "tiny" / "ioi" / GUIDED
    found = read_json(folder / "recovery.json")
    assert (found["method"], found["search"]) == ("guided_greedy", GUIDED)
    assert sorted(found["ranking"]) == sorted(HEADS) and found["confirmed"] == found["top_heads"]
    with np.load(folder / "record.npz") as record:
        masks, scores, backgrounds, costs = record["masks"], record["scores"], record["backgrounds"], record["costs"]
    assert len({row.tobytes() for row in masks}) == len(masks)
    score = {frozenset(np.flatnonzero(row).tolist()): value for row, value in zip(masks, scores)}
    chosen = []
    for step, name in enumerate(found["top_heads"]):
        assert sorted(np.flatnonzero(backgrounds[step]).tolist()) == sorted(chosen)  # the gradient beside them
        base = score[frozenset(chosen)]
        listed = [HEADS.index(h) for h in found["details"]["steps"][step]["list"]]
        beside = {h: score[frozenset(chosen + [h])] for h in listed}
        best = min(beside, key=lambda h: (beside[h], h))
        assert name == HEADS[best] and found["coef"][name] == pytest.approx(beside[best] - base)
        chosen.append(best)
    assert found["n_evals"] == len(masks) + math.ceil(costs.sum() - 1e-9) and len(backgrounds) == TOP_K
    assert found["intercept"] == pytest.approx(score[frozenset()])
    log = results / "logs" / "guided_search" / "tiny" / "ioi" / f"{GUIDED}.log"
    assert f"{TOP_K} gradient passes" in log.read_text()


def test_the_screened_search_through_its_rule_chooses_what_its_record_says(results):
    """screened_greedy: one search_job job (kind guided). Its record is the oracle: the registered
    algorithm replayed on the record's scores and gradients chooses the heads recovery.json
    confirms, and each chosen head's value is the change its label says was measured (alone, beside
    the heads before it, or with its pair's partner beside them)."""
    from headloc.methods import get
    from headloc.methods.kinds.guided import GuidedParams

    folder = results / "tiny" / "ioi" / SCREENED
    found = read_json(folder / "recovery.json")
    assert (found["method"], found["search"]) == ("screened_greedy", SCREENED)
    with np.load(folder / "record.npz") as record:  # no gradient arrays where the screen found every head
        masks, scores = record["masks"], record["scores"]
        gradients = (record["backgrounds"], record["estimates"]) if "backgrounds" in record.files else ([], [])
    score = {frozenset(np.flatnonzero(row).tolist()): value for row, value in zip(masks, scores)}
    beside = {frozenset(np.flatnonzero(row).tolist()): value for row, value in zip(*gradients)}
    method = get("screened_greedy")
    replay = method.algorithm(lambda bg: beside[frozenset(bg)], lambda sets: [score[frozenset(s)] for s in sets],
                              len(HEADS), GuidedParams(method.name, TOP_K, method.options_of({}), seed=0))
    assert found["confirmed"] == [HEADS[h] for h in replay.heads] == found["top_heads"][:len(replay.heads)]
    assert replay.gradient_passes == len(beside) and replay.evaluations == len(masks)
    assert found["details"]["set_aside"] == [HEADS[h] for h in replay.details["set_aside"]]
    for head, background, together in zip(replay.heads, replay.beside, replay.together):
        change = score[frozenset(background + [head] + together)] - score[frozenset(background)]
        assert found["coef"][HEADS[head]] == pytest.approx(change)
    assert found["intercept"] == pytest.approx(score[frozenset()])


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_each_repeat_of_the_screened_search_screens_its_own_partition(results, repeat):
    """search.repeats draws the screen again: repeat r's record starts with the unablated model and
    group testing's partition for seed search.seed + r."""
    from headloc.search.group_testing import GroupTesting

    folder = results / "tiny" / "ioi" / sorted(SCREENED_RUNS)[repeat]
    with np.load(folder / "record.npz") as record:
        masks = record["masks"]
    groups = GroupTesting(n_heads=len(HEADS), n_masks=2 * len(HEADS) + 2, seed=repeat, k=TOP_K, extra_heads=0).partition()
    assert [sorted(np.flatnonzero(row).tolist()) for row in masks[:len(groups) + 1]] == [[]] + [sorted(g) for g in groups]


# ---------------------------------------------------------------- one GPU per job

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", re.M)  # headloc.io.log_to_file's lines


def test_a_kind_is_chunked_where_the_rules_score_its_masks_in_search_chunks_jobs(tiny_model_dir, tmp_path):
    """Kind.chunked (what the config's note on an ignored search.chunks reads) against the plan: a dry
    run of every method with 3 chunks schedules chunks 0-2 of the designs or rounds a chunked kind's
    searches score, and no scoring job for the others. Greedy runs on a task of its own, so that
    one-shot greedy scores a design of its own."""
    config = methods_config(tiny_model_dir)
    config["search"]["chunks"] = 3
    config["universal"]["filter"] = False  # greedy's rounds then wait on no checkpoint
    config["tasks"]["ioi"]["search"]["methods"] = [m for m in methods.names() if m != "greedy"]
    config["tasks"]["induction"]["search"] = {"methods": ["greedy", "cs_stratified"]}  # the tables' method too
    config["conditional_group_testing"] = GROUP_TESTING  # 4 groups fit the budget of 6
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    plan = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml")).stdout
    jobs = [dict(re.findall(r"(\w+)=([^,\s]+)", line)) for line in plan.splitlines()
            if line.strip().startswith("wildcards:")]
    chunks = {}  # method -> {(stage, chunk)} of its searches' scoring jobs
    for job in jobs:
        if "search" in job:
            method = max((m for m in methods.names() if job["search"].startswith(m + "_")), key=len)
            found = chunks.setdefault(method, set())
            if "chunk" in job:
                found.add((job.get("round"), job["chunk"]))
    assert set(chunks) == set(methods.names()), sorted(chunks)
    for method, found in chunks.items():
        stages = {stage for stage, _ in found}
        chunked = methods.get(method).kind.chunked
        assert found == {(stage, chunk) for stage in stages for chunk in "012"} and bool(found) == chunked, method


def job_span(log: Path) -> tuple[datetime, datetime, str]:
    """(first logged time, last logged time, GPU claimed) of one job, from its own log."""
    text = log.read_text()
    claims = re.findall(rf"GPU: claimed (\S+) of {FAKE_GPUS} \(pid", text)
    assert len(claims) == 1, f"{log}: {len(claims)} GPU claims"
    stamps = [datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f") for stamp in STAMP.findall(text)]
    return stamps[0], stamps[-1], claims[0]


def test_concurrent_evaluating_jobs_each_hold_their_own_gpu(results):
    """The run had CUDA_VISIBLE_DEVICES=0,1,2 and --resources gpu=3: Snakemake ran three evaluating
    jobs at a time and said nothing of which GPU each should use. Every score_masks and
    search_job claimed one, from its first log line to its last no other job held it,
    and all three were used (the third is claimed only while the other two are held)."""
    logs = sorted((results / "logs" / "score_masks").rglob("*.log"))
    logs += sorted((results / "logs" / "sequential_search").rglob("*.log"))
    logs += sorted((results / "logs" / "guided_search").rglob("*.log"))
    spans = [job_span(log) for log in logs]
    assert len(spans) >= 6 and {gpu for *_, gpu in spans} == set(FAKE_GPUS.split(","))
    overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]]
    shared = [(a, b) for a, b in overlapping if a[2] == b[2]]
    assert overlapping and not shared, f"{len(shared)} of {len(overlapping)} overlapping pairs shared a GPU"


# ---------------------------------------------------------------- gradient methods


def recovery(run, method):
    return read_json(run / "tiny" / "ioi" / SEARCHES[method] / "recovery.json")


def gold_loglik(model_dir, examples):
    """Mean over documents of the gold continuation's log-likelihood, one unpadded forward each."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    total = 0.0
    with torch.no_grad():
        for example in examples:
            ids = torch.tensor([list(example.context) + list(example.target)])
            logprobs = torch.log_softmax(model(ids).logits[0, :-1].double(), dim=-1)
            n = len(example.target)
            gold = logprobs[-n:].gather(-1, ids[0, -n:, None])
            total += float(gold.sum())
    return total / len(examples)


def test_gradient_searches_write_recoveries(results, tiny_model_dir):
    from transformers import AutoTokenizer

    from headloc.engine.lm_eval_tasks import TaskSpec
    from headloc.engine.supervision import task_examples

    for method in ("attribution", "chg"):
        found = recovery(results, method)
        folder = results / "tiny" / "ioi" / SEARCHES[method]
        assert not (folder / "masks.npy").exists(), "a gradient search scores no masks"
        assert (results / "logs" / "gradient_search" / "tiny" / "ioi" / f"{SEARCHES[method]}.log").is_file()
        assert (found["model"], found["task"], found["search"], found["method"]) == (
            "tiny", "ioi", SEARCHES[method], method)
        assert (found["n_layers"], found["n_heads"]) == (2, 4)
        assert sorted(found["ranking"]) == sorted(HEADS) and sorted(found["coef"]) == sorted(HEADS)
        assert found["top_heads"] == found["ranking"][:TOP_K]
        cost = found["cost"]
        # the cost in masked evaluations: a fwd+bwd pass is three forward passes of the same tokens
        assert found["n_evals"] > 0
        assert found["n_evals"] == math.ceil((3 * cost["fwd_bwd_tokens"] + cost["forward_tokens"])
                                             / cost["eval_tokens"] - 1e-9)

    attribution = recovery(results, "attribution")
    # one fwd+bwd pass over the four documents (batch_size 8 holds them): three evaluations' worth
    assert BATCH_SIZE >= ID_DOCS
    assert attribution["cost"]["fwd_bwd_passes"] == 1 and attribution["n_evals"] == 3
    coef = attribution["coef"]
    assert attribution["ranking"] == sorted(HEADS, key=lambda h: (coef[h], HEADS.index(h)))
    assert all(coef[h] == pytest.approx(-attribution["gradient"][h]) for h in HEADS)
    # its intercept is the unablated score: the mean gold log-likelihood of the identification subset
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    subset = results / "data" / "ioi" / f"id_{ID_DOCS}_seed0.jsonl"
    assert len(subset.read_text().splitlines()) == ID_DOCS
    examples = task_examples(tokenizer, TaskSpec("headloc_ioi").with_documents(subset))
    assert len(examples) == ID_DOCS
    assert attribution["intercept"] == pytest.approx(gold_loglik(tiny_model_dir, examples), abs=1e-4)

    chg = recovery(results, "chg")
    # the config's chg section reached the fit: two seed rows, lambda 0.1, at most 6 updates per fit
    assert chg["hyperparameters"]["seeds"] == [0, 1] and chg["hyperparameters"]["lam"] == CHG["lam"]
    assert chg["hyperparameters"]["init_steps"] == chg["hyperparameters"]["fit_steps"] == CHG["steps"]
    assert len(chg["per_seed"]["g_minus"]) == CHG["seeds"]
    # its cost, counted from the plan of the fits: 3 training documents (one of 4 held out), no early
    # stop (held-out checks at steps 0 and 6 only), rows per pass capped by the model's batch_size 8:
    # the lambda=0 fit runs 2 gate rows (4 documents a pass), the G+/G- fit 4 rows (2 documents a pass)
    steps, rows, train = CHG["steps"], BATCH_SIZE, ID_DOCS - 1
    assert all(run == steps for stage in chg["stages"].values() for run in stage["steps_run"])
    per_pass = {"init": rows // CHG["seeds"], "pm": rows // (2 * CHG["seeds"])}
    assert chg["cost"]["fwd_bwd_passes"] == steps * (math.ceil(train / per_pass["init"])
                                                     + math.ceil(train / per_pass["pm"]))
    assert chg["cost"]["fwd_bwd_rows"] == steps * train * (CHG["seeds"] + 2 * CHG["seeds"])
    assert chg["cost"]["forward_passes"] == 2 * 2 and chg["cost"]["forward_rows"] == 2 * (CHG["seeds"] + 2 * CHG["seeds"])
    # ranked by facilitation: mean G- over the seed rows, highest first
    g_minus = {h: sum(row[HEADS.index(h)] for row in chg["per_seed"]["g_minus"]) / CHG["seeds"] for h in HEADS}
    assert all(chg["g_minus"][h] == pytest.approx(g_minus[h]) for h in HEADS)
    ordered = [g_minus[h] for h in chg["ranking"]]
    assert ordered == sorted(ordered, reverse=True)
    assert all(chg["coef"][h] == pytest.approx(-g_minus[h]) for h in HEADS)
    held, trained = chg["split"]["holdout_doc_ids"], chg["split"]["train_doc_ids"]
    assert len(held) == 1 and sorted(held + trained) == [e.doc_id for e in examples]

    # the compressed-sensing search beside them is unchanged: masks, Lasso, M evaluations
    cs = recovery(results, "cs_stratified")
    assert cs["n_evals"] == N_MASKS and (results / "tiny" / "ioi" / SEARCHES["cs_stratified"] / "masks.npy").exists()


def test_table9_lists_every_search(results):
    table = pd.read_csv(results / "tables" / "table9.csv")
    universal = set(read_json(results / "tiny" / "universal_heads.json")["heads"])
    on_disk = {(task, path.parent.name) for task in TASKS
               for path in (results / "tiny" / task).glob("*/recovery.json")}
    assert {(row.task, row.search) for row in table.itertuples()} == on_disk and len(table) == len(on_disk)
    assert set(SEARCHES.values()) <= set(table["search"])
    marked = 0
    for row in table.itertuples():
        found = read_json(results / "tiny" / row.task / row.search / "recovery.json")
        assert row.method == found["method"] and row.n_evals == found["n_evals"]
        # the universal filter is on: a search's heads are its best k that are not universal, each
        # marked ? that its search (group testing) did not confirm alone
        shown = [h for h in found["ranking"] if h not in universal][:TOP_K]
        confirmed = found["confirmed"]
        assert row.heads.split(", ") == [h + ("?" if confirmed is not None and h not in confirmed else "")
                                         for h in shown]
        marked += row.heads.count("?")
    md = (results / "tables" / "table9.md").read_text()  # each search by its short label, the CSV's full id
    shown = {"cs_stratified": f"cs_stratified m{N_MASKS} p0.25", "attribution": "attribution",
             "chg": f"chg x{CHG['seeds']} t{CHG['steps']}"}  # what differs from the defaults (chg: 4 seeds, 500 steps)
    assert all(f"| {method} | {shown[method]} |" in md for method in SEARCHES)
    assert not any(search in md for search in SEARCHES.values())
    assert ("?: a head its search did not confirm" in md) == (marked > 0)


# ---------------------------------------------------------------- the HTML report

# a phrase only the heatmap caption of that method says
READING = {"cs_stratified": "stratified: every mask", "greedy1s": "head alone is ablated",
           "greedy": "greedy round it was chosen in", "attribution": "minus d score / d gate",
           "chg": "Causal Head Gating", "cs_adaptive": "two stages", "random": "drawn from the seed",
           "group_testing": "smallest group of heads that holds it", "thompson": "posterior mean reward",
           "guided_greedy": "step's short list", "screened_greedy": "score's floor"}


def embedded(page: str, name: str):
    """The JSON the report's page assigns to ``var <name>``."""
    match = re.search(rf"\bvar {name} = (\"|\{{)(.*?);\n", page, flags=re.S)
    assert match, f"report has no var {name}"
    return json.loads(match.group(1) + match.group(2))


def text(caption_html: str) -> str:
    """A caption's words: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", caption_html)).split())


def decoded(data_uri: str) -> bytes:
    return base64.b64decode(data_uri.split(";base64,", 1)[1])


def searches(work):
    """(task, search id) -> method, read off the run's recovery records (whatever the ids spell)."""
    found = {}
    for task in TASKS:
        for path in sorted((work / "results" / "tiny" / task).glob("*/recovery.json")):
            found[task, path.parent.name] = json.loads(path.read_text())["method"]
    methods = {task: {method for (t, _), method in found.items() if t == task} for task in TASKS}
    assert methods == {"ioi": set(IOI_METHODS), "induction": set(METHODS)}, "every configured method searched"
    return found


def expected_results(work):
    tables = {f"results/tables/{name}.html": name for name in TABLES if name != "tuning"}
    # no knowledge tasks configured: `all` draws no Figure 3 or 4 (docs/targets.md)
    figures = {f"results/figures/{name}.png": name for name in FIGURES if name not in ("fig3", "fig4")}
    heatmaps = {f"results/tiny/{task}/{search}/heatmap.png": (task, method, search)
                for (task, search), method in searches(work).items()}
    return tables, figures, heatmaps


def test_report_holds_every_table_figure_and_heatmap(methods_run):
    page = (methods_run / "report.html").read_text()
    results = embedded(page, "results")
    tables, figures, heatmaps = expected_results(methods_run)
    assert set(results) == set(tables) | set(figures) | set(heatmaps)
    for path, name in tables.items():
        entry = results[path]
        assert entry["labels"] == {"table": name, "shows": TABLES[name].about}
        assert entry["mime_type"] == "text/html"
        assert TABLES[name].about in text(entry["caption"])
        deltas = name not in ("table1", "table9", "table10")  # counts and head lists, no deltas
        assert ("Deltas are each in the unit of their task" in text(entry["caption"])) == deltas, name
        shown = decoded(entry["data_uri"]).decode()
        assert shown == (methods_run / path).read_text() and "<table>" in shown
    for path, name in figures.items():
        entry = results[path]
        assert entry["labels"] == {"figure": name, "shows": FIGURES[name].about}
        assert entry["mime_type"] == "image/png"
        assert FIGURES[name].about in text(entry["caption"])
        assert decoded(entry["data_uri"]) == (methods_run / path).read_bytes()
    for path, (task, method, search) in heatmaps.items():
        entry = results[path]
        assert entry["labels"] == {"model": "tiny", "method": method, "search": search}
        assert entry["mime_type"] == "image/png"
        caption = text(entry["caption"])
        assert search in caption and f"tiny / {task}" in caption
        # how to read this method's cells, and no other method's
        assert [m for m, phrase in READING.items() if phrase in caption] == [method], caption
        assert decoded(entry["data_uri"]) == (methods_run / path).read_bytes()


def test_report_groups_and_describes_the_run(methods_run):
    page = (methods_run / "report.html").read_text()
    categories = embedded(page, "categories")
    assert set(categories) == {"Tables", "Figures", "Heatmaps"}
    assert set(categories["Heatmaps"]) == set(TASKS), "heatmaps grouped by task"
    description = embedded(page, "workflow_desc")
    assert "capability attention heads" in description
    # the run's models and methods, from its config, per-task methods included
    assert "models\ntiny on the tasks" in description and "(search methods: cs_stratified, greedy1s, greedy; on ioi: " \
        f"{', '.join(IOI_METHODS)})" in description, description


def test_heatmaps_match_their_records(methods_run):
    from PIL import Image

    from headloc.report.heatmap import figure_size

    sizes = {}
    for (task, search), method in searches(methods_run).items():
        folder = methods_run / "results" / "tiny" / task / search
        record = json.loads((folder / "recovery.json").read_text())
        assert record["method"] == method
        with Image.open(folder / "heatmap.png") as image:
            sizes[method] = image.size
        panels = 2 if method == "chg" else 1  # chg's record carries its G- and G+ gates
        width, height = figure_size(record["n_layers"], record["n_heads"], panels)
        assert sizes[method][0] == round(width * 120) and sizes[method][1] >= round(height * 120)
        if sizes[method][1] > round(height * 120):  # grown for a title of many lines: the search's warnings
            assert record.get("warnings"), (method, sizes[method])
        assert (methods_run / "results" / "logs" / "plot_heatmap" / "tiny" / task / f"{search}.log").is_file()
    assert sizes["chg"][0] > sizes["cs_stratified"][0]


# ---------------------------------------------------------------- headloc.locate and the exports (issue 34)

LOCATED = {"cs_stratified": {"budget": N_MASKS}, "cs_adaptive": {"budget": N_MASKS}, "greedy1s": {},
           "attribution": {}, "chg": {"options": CHG}, "random": {}, "guided_greedy": {}, "screened_greedy": {}}


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir):
    from headloc.model.loading import load_model

    return load_model(str(tiny_model_dir))


@pytest.mark.parametrize("method", LOCATED)
def test_locate_matches_the_workflow(method, results, tiny_model):
    """headloc.locate on the loaded model, the run's ioi identification subset and its settings gives
    the recovery the workflow wrote: the same search id, ranking, per-head values and evaluations."""
    import headloc

    model, tokenizer = tiny_model
    found = headloc.locate(model, tokenizer, "headloc_ioi", method=method, top_k=TOP_K, sparsity=0.25,
                           alpha=0.001, documents=results / "data" / "ioi" / f"id_{ID_DOCS}_seed0.jsonl",
                           batch_size=BATCH_SIZE, model_name="tiny", progress=False, **LOCATED[method])
    ids = [p.parent.name for p in (results / "tiny" / "ioi").glob(f"{method}_*/recovery.json")
           if "_r" not in p.parent.name and "of" not in p.parent.name]
    assert found.search_id in ids, (found.search_id, ids)
    recovery = read_json(results / "tiny" / "ioi" / found.search_id / "recovery.json")
    assert found.ranking == recovery["ranking"]
    assert found.values == pytest.approx(recovery["coef"], abs=1e-6, nan_ok=True) if method != "random" \
        else found.values == recovery["coef"]
    assert found.n_evals == recovery["n_evals"]


def test_export_writes_every_search(methods_run, results, tiny_model_dir):
    """`snakemake export`: one tidy row per search and head, recomputed from every recovery.json, and
    one MIB submission read with tests/mib_format.py (EAP-IG's loader, MIB's circuit selection): each
    task's main search (cs_stratified) in `<task>_tiny`, the graph config the tiny Llama's config.json
    says, MIB's circuits at every size headloc's top heads. Then export.mib names MIB's task and model
    and picks greedy, whose ranking ends with the universal heads it left out: only the export re-runs."""
    import mib_format

    recoveries = sorted((results / "tiny").glob("*/*/recovery.json"))
    table = pd.read_csv(results / "exports" / "heads.csv")
    assert list(table.columns) == ["model", "task", "search", "head", "layer", "index", "value", "rank", "status",
                                   "low", "high", "p_top_k", "found"]
    assert len(table) == 8 * len(recoveries) and len(recoveries) > 10
    for path in recoveries:
        record = read_json(path)
        rows = table[(table["task"] == record["task"]) & (table["search"] == record["search"])].set_index("head")
        assert rows["rank"].to_dict() == {h: i + 1 for i, h in enumerate(record["ranking"])}
        values = {h: np.nan if v is None else v for h, v in record["coef"].items()}
        assert rows["value"].to_dict() == pytest.approx(values, nan_ok=True)
        assert (rows["layer"] * 4 + rows["index"]).to_dict() == {h: HEADS.index(h) for h in HEADS}
        # each head's evidence as recovery.json gives it: status, interval, P(top k), found above the noise
        assert rows["status"].to_dict() == record["status"]
        for end, column in enumerate(("low", "high")):
            ends = {h: np.nan if i is None else i[end] for h, i in record["interval"].items()}
            assert rows[column].to_dict() == pytest.approx(ends, nan_ok=True)
        p_top = {h: np.nan if p is None else p for h, p in record["p_top_k"].items()}
        assert rows["p_top_k"].to_dict() == pytest.approx(p_top, nan_ok=True)
        found = rows["found"].to_dict()
        if record["found"] is None:
            assert all(pd.isna(v) for v in found.values()), found
        else:
            assert found == {h: h in record["found"] for h in HEADS}
    model = read_json(tiny_model_dir / "config.json")
    cfg = {"n_layers": model["num_hidden_layers"], "n_heads": model["num_attention_heads"],
           "d_model": model["hidden_size"], "parallel_attn_mlp": False}  # a Llama: attention, then MLP
    sizes = (*mib_format.PERCENTAGES, .25, .75)  # 8 heads: MIB's own sizes keep 0, 1, 4 or 8

    def check_submission(folders, method, search):
        submission = results / "exports" / "mib"
        graphs = mib_format.read_submission(submission)
        assert list(graphs) == sorted(folders)
        ids = pd.read_csv(submission / "headloc.tsv", sep="\t")
        assert sorted(ids.iloc[:, :5].values.tolist()) == sorted([folder, "tiny", task, search, method]
                                                                 for folder, task in folders.items())
        for row in ids.itertuples():  # how many heads each folder's search measured, estimated, never measured
            status = list(read_json(results / "tiny" / folders[row.folder] / search / "recovery.json")["status"].values())
            assert (row.measured, row.estimated, row.unmeasured) == tuple(
                status.count(kind) for kind in ("measured", "estimated", "unmeasured"))
        universal = read_json(results / "tiny" / "universal_heads.json")["heads"]  # the tables filter them
        assert set(ids["universal_ranked_down"]) == {",".join(universal)}
        for folder, task in folders.items():
            assert graphs[folder].cfg == cfg
            record = read_json(results / "tiny" / task / search / "recovery.json")
            # the order the tables validate: the universal heads after the others, heads never measured last
            measured = [h for h in record["ranking"] if record["status"][h] != "unmeasured"]
            ranking = ([h for h in measured if h not in universal] + [h for h in measured if h in universal]
                       + [h for h in record["ranking"] if h not in measured])
            assert mib_format.ranking_problems(graphs[folder], ranking, sizes) == []

    check_submission({"ioi_tiny": "ioi", "induction_tiny": "induction"}, "cs_stratified", cs("cs_stratified"))
    config = yaml.safe_load((methods_run / "config.yaml").read_text())
    config["export"] = {"mib": {"method": "greedy", "tasks": {"ioi": "ioi"}, "models": {"tiny": "gpt2"}}}
    (methods_run / "mib.yaml").write_text(yaml.safe_dump(config))
    ran = snakemake("export", "--cores", CORES, "--directory", str(methods_run), "--configfile",
                    str(methods_run / "mib.yaml"))
    assert re.findall(r"rule (\w+):", ran.stdout + ran.stderr) == ["export"]
    check_submission({"ioi_gpt2": "ioi", "induction_gpt2": "induction"}, "greedy", GREEDY)
    universal = read_json(results / "tiny" / "universal_heads.json")["heads"]
    ranking = read_json(results / "tiny" / "ioi" / GREEDY / "recovery.json")["ranking"]
    assert sorted(ranking[-len(universal):]) == sorted(universal)  # what the MIB order above kept last


def test_locate_validates_as_the_workflow(results, tiny_model):
    """Located.validate on the run's full documents gives the Delta Task and Delta Gen of the
    workflow's evaluations of the same top k (results/<model>/evals: unablated and ablated)."""
    import headloc
    from headloc.heads import format_headset

    model, tokenizer = tiny_model
    data = results / "data"
    found = headloc.locate(model, tokenizer, "headloc_ioi", method="greedy1s", top_k=TOP_K, batch_size=BATCH_SIZE,
                           documents=data / "ioi" / f"id_{ID_DOCS}_seed0.jsonl", progress=False)
    check = found.validate(tasks={"induction": "headloc_induction"}, progress=False,
                           documents={"headloc_ioi": data / "ioi" / "test.jsonl",
                                      "induction": data / "induction" / "test.jsonl"})
    evals = results / "tiny" / "evals"
    delta = {task: 100 * (read_json(evals / task / f"{format_headset(check.heads)}.json")["value"]
                          - read_json(evals / task / "none.json")["value"]) for task in TASKS}
    assert check.heads == found.ranking[:TOP_K]
    assert check.delta_task == pytest.approx(delta["ioi"], abs=1e-9)
    assert check.delta_gen == pytest.approx(delta["induction"], abs=1e-9)
    assert check.scores["n_docs"].tolist() == [6, 6]
