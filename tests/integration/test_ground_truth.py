"""The planted-head family on its tiny member: build, truth.json, determinism, recovery.

The tiny model is built once per module from config/ground_truth.yaml and measured with
headloc.groundtruth.truth (which also scores the clean and planted-set masks through lm-eval).
The checks below recompute what they check with their own code: heads are removed by zeroing the
columns of the output projection that read them (not by headloc's gate hooks), documents are
tokenised from the saved vocabulary by splitting on spaces, and the answer is the choice whose
token gets the highest logit at the last position.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from headloc.groundtruth import build as build_module
from headloc.groundtruth.build import build
from headloc.groundtruth.recipe import load_config, recipe_from_config
from headloc.groundtruth.truth import measure
from headloc.workflow.portable import code_digest

from checkpoint_checks import accuracy, documents, gold_logprob, load, parse, without

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "ground_truth.yaml"


CACHE = REPO / "results" / "test-cache" / "planted"  # ignored by git, like conftest's SmolLM2 cache


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny model of the current recipe, built once per recipe and builder code (its training takes
    minutes on 2 cores, more than a test should repeat), and its truth measured afresh."""
    recipe = recipe_from_config(load_config(CONFIG), "tiny")
    folder = CACHE / f"tiny-{recipe.digest()}-{code_digest(build_module.__file__)}" / "model"
    if not (folder / "planted.json").exists():
        build(recipe, folder, threads=1, log=lambda *a: None)
    assert json.loads((folder / "planted.json").read_text())["digest"] == recipe.digest()
    truth = measure(folder, log=lambda *a: None)
    return recipe, folder, truth


@pytest.mark.ground_truth
def test_truth_matches_an_independent_computation(tiny):
    recipe, folder, truth = tiny
    model = load(folder)
    heads = [(l, h) for l in range(recipe.size.layers) for h in range(recipe.size.heads)]
    for task, entry in truth["tasks"].items():
        data = documents(folder, task)
        base = accuracy(model, *data)
        assert entry["baseline"]["acc"] == pytest.approx(base, abs=1e-9)
        assert entry["lm_eval"]["none"] == pytest.approx(base, abs=1e-9)  # lm-eval itself agrees
        for layer, head in heads:  # every head, ablated alone
            name = f"L{layer}H{head}"
            assert entry["single"][name]["acc"] == pytest.approx(accuracy(without(model, [(layer, head)]), *data),
                                                                 abs=1e-9), (task, name)
        planted = [parse(h) for h in entry["planted_set"]["heads"]]
        assert entry["planted_set"]["acc"] == pytest.approx(accuracy(without(model, planted), *data), abs=1e-9)
        if "pair" in entry:
            pair = [parse(h) for h in entry["pair"]["heads"]]
            both = accuracy(without(model, pair), *data) - base
            assert entry["pair"]["both_delta"] == pytest.approx(both, abs=1e-4)
        # what truth.json flags follows from its own numbers and threshold
        t = truth["threshold"]
        others = [h for h in entry["single"] if h not in entry["planted_set"]["heads"]]
        assert entry["unplanted_but_strong"] == [h for h in others if entry["single"][h]["delta"] <= -t]
        assert entry["strongest_unplanted"]["delta"] == min(entry["single"][h]["delta"] for h in others)


def test_build_is_deterministic(tmp_path):
    recipe = recipe_from_config(load_config(CONFIG), "tiny")
    short = dataclasses.replace(recipe, size=dataclasses.replace(recipe.size, steps=8))
    reseeded = dataclasses.replace(short, size=dataclasses.replace(short.size, seed=short.size.seed + 1))
    quiet = dict(threads=1, log=lambda *a: None)
    a, b = build(short, tmp_path / "a", **quiet), build(short, tmp_path / "b", **quiet)
    c = build(reseeded, tmp_path / "c", **quiet)
    wa, wb, wc = (load(x).state_dict() for x in (a, b, c))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa)
    assert short.digest() != reseeded.digest()
    for task in recipe.design.tasks:  # documents depend on the design only
        assert (a / "tasks" / f"{task}.jsonl").read_bytes() == (c / "tasks" / f"{task}.jsonl").read_bytes()


def single_ablation_ranking(model, data, heads):
    base = gold_logprob(model, *data)
    effect = {h: gold_logprob(without(model, [h]), *data) - base for h in heads}
    return sorted(heads, key=lambda h: effect[h])


@pytest.mark.ground_truth
@pytest.mark.parametrize("task", ["copy1", "copy3"])
def test_one_shot_ablation_recovers_the_planted_heads(tiny, task):
    """The 1-head task (its role head and the universal head) and the 3-head task (three role heads
    and the universal head): their planted heads are the most damaging heads when each is removed
    alone, on the gold answer's log-probability (on accuracy, a role head of the frozen recipe can
    be below truth.json's threshold: docs/ground-truth.md)."""
    recipe, folder, truth = tiny
    model = load(folder)
    heads = [(l, h) for l in range(recipe.size.layers) for h in range(recipe.size.heads)]
    planted = {parse(h) for h in truth["tasks"][task]["planted_set"]["heads"]}
    assert len(planted) == len(recipe.design.tasks[task]) + 1
    ranking = single_ablation_ranking(model, documents(folder, task), heads)
    assert set(ranking[: len(planted)]) == planted


@pytest.mark.ground_truth
def test_lasso_over_random_masks_recovers_the_one_head_task(tiny):
    """Compressed sensing as the paper does it: random sparse masks, a score per mask (here the gold
    answer's log-probability), sklearn's Lasso."""
    from sklearn.linear_model import Lasso

    recipe, folder, truth = tiny
    model = load(folder)
    heads = [(l, h) for l in range(recipe.size.layers) for h in range(recipe.size.heads)]
    data = documents(folder, "copy1")
    rng = np.random.default_rng(0)
    masks = (rng.random((120, len(heads))) < 0.1).astype(float)
    scores = [gold_logprob(without(model, [h for h, m in zip(heads, row) if m]), *data) for row in masks]
    fit = Lasso(alpha=0.002).fit(masks, scores)
    top = [heads[i] for i in np.argsort(fit.coef_)[:2]]
    assert set(top) == {parse(h) for h in truth["tasks"]["copy1"]["planted_set"]["heads"]}


def test_frozen_phase_moves_only_the_planted_heads(monkeypatch):
    """Scheme frozen: from the end of phase 1 on, the only weights that change are the planted heads'
    own q/k/v rows (and biases) and o_proj columns."""
    from headloc.groundtruth import build as builder
    from headloc.groundtruth import frozen

    recipe = recipe_from_config(load_config(CONFIG), "tiny")
    assert recipe.training["scheme"] == "frozen"
    short = dataclasses.replace(recipe, size=dataclasses.replace(recipe.size, steps=20))
    after_text = {}
    freeze = frozen.freeze_all_but

    def snapshot_then_freeze(model, heads):
        after_text.update({k: v.detach().clone() for k, v in model.state_dict().items()})
        return freeze(model, heads)

    monkeypatch.setattr(frozen, "freeze_all_but", snapshot_then_freeze)
    model, _ = builder.train(short, threads=1, log=lambda *a: None)
    d = model.config.head_dim
    planted = [parse(h) for hs in short.placement().values() for h in hs]
    moved = 0
    for key, value in model.state_dict().items():
        changed = value != after_text[key]
        allowed = torch.zeros_like(changed)
        *_, proj, kind = key.split(".")
        if ".self_attn." in key and proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            layer = int(key.split(".")[2])
            for head in [h for l, h in planted if l == layer]:
                if proj != "o_proj":
                    allowed[head * d:(head + 1) * d] = True
                elif kind == "weight":  # o_proj's bias is shared by every head: frozen
                    allowed[:, head * d:(head + 1) * d] = True
        assert not (changed & ~allowed).any(), key
        moved += bool(changed.any())
    assert moved > 0


@pytest.mark.ground_truth
def test_the_benchmark_scores_a_method_against_the_truth(tiny, tmp_path):
    """The ground-truth benchmark (headloc.groundtruth.benchmark) on copy3: one-shot greedy's top k
    are the k heads whose removal alone lowers the gold log-probability most (recomputed here by
    zeroing o_proj columns), its recall is their overlap with the role heads (the universal head
    scored on its own), and it spent one evaluation per head plus one."""
    from headloc.groundtruth.benchmark import benchmark
    from headloc.groundtruth.scoring import task_truth

    recipe, folder, truth = tiny
    planted = tmp_path / "tiny"
    planted.mkdir()
    (planted / "model").symlink_to(folder)
    (planted / "truth.json").write_text(json.dumps(truth))
    table = benchmark(planted, ["greedy1s"], [], [0], sparsity=0.05, alpha="cv", tasks=["copy3"])
    (row,) = table.to_dict("records")
    model = load(folder)
    data = documents(folder, "copy3")
    base = gold_logprob(model, *data)
    heads = [(l, h) for l in range(recipe.size.layers) for h in range(recipe.size.heads)]
    effect = {f"L{l}H{h}": gold_logprob(without(model, [(l, h)]), *data) - base for l, h in heads}
    sets = task_truth(truth["tasks"]["copy3"])  # the universal head and the role heads (no pair here)
    k = len(truth["tasks"]["copy3"]["planted_set"]["heads"])
    assert sets["k"] == k and len(sets["roles"]) == k - 1
    expected = sorted(effect, key=effect.get)[:k]
    assert row["k"] == k and set(row["top"].split("+")) == set(expected)
    assert row["recall"] == pytest.approx(len(set(expected) & set(sets["roles"])) / len(sets["roles"]))
    assert row["universal_found"] == (set(sets["universal"]) <= set(expected))
    assert row["n_evals"] == len(heads) + 1
