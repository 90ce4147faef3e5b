"""The certified planted family (issue 31): a constructed model, its certificate, its own workflow.

A small constructed model (the c32 recipe with 60 text steps, about 35 s) is built once per module
by the tests marked ``ground_truth`` (``make test-ground-truth``; ``make test`` runs the rest). What it
must be is checked with code of the test's own: heads are removed by zeroing the output projection's
columns that read them (not headloc's gate hooks), documents are tokenised by splitting on spaces
from the saved vocabulary, and scores are the gold's log-probability among the choices.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from headloc.groundtruth import construct as C
from headloc.groundtruth import tasks as T
from headloc.groundtruth.build import build
from headloc.groundtruth.recipe import load_config, recipe_from_config
from headloc.groundtruth.truth import certificate, measure

from checkpoint_checks import documents, gold_logprobs, load, read_docs, without

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "ground_truth.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    recipe = recipe_from_config(load_config(CONFIG), "c32-s0")
    recipe = dataclasses.replace(recipe, size=dataclasses.replace(recipe.size, steps=60))
    folder = build(recipe, tmp_path_factory.mktemp("c32") / "model", threads=1, log=lambda *a: None)
    return recipe, folder


def per_doc(model, *data) -> np.ndarray:
    return gold_logprobs(model, *data).numpy()


@pytest.mark.ground_truth
def test_every_role_head_carries_its_own_documents_and_nothing_else(built):
    recipe, folder = built
    model, placement = load(folder), recipe.placement()
    for task, kinds in recipe.design.tasks.items():
        docs, data = read_docs(folder, task, recipe.design.stratify), documents(folder, task, recipe.design.stratify)
        base = per_doc(model, *data)
        assert base.min() > -0.2 and base.mean() > -0.05, task  # every searched document answered, by a margin
        assert per_doc(without(model, placement["universal"]), *data).mean() < -1.0  # near chance (-1.39)
        for kind in kinds:
            mine = np.array([d["role"] == kind.role for d in docs])
            assert mine.sum() == round(kind.weight * recipe.design.stratify)  # stratified: the kind's share
            heads = placement[kind.role]
            if len(heads) == 2:  # the redundant pair: either head suffices, both removed is chance
                for head in heads:
                    assert per_doc(without(model, [head]), *data).mean() > base.mean() - 0.05
            after = per_doc(without(model, heads), *data)
            assert after[mine].mean() < -1.0, (task, kind.role)
            assert np.abs(after[~mine] - base[~mine]).max(initial=0) < 0.01, (task, kind.role)


@pytest.mark.ground_truth
def test_trained_weights_never_touch_the_task_dims(built):
    recipe, folder = built
    model, layout = load(folder), C.layout_of(recipe)
    task = slice(layout.text, model.config.hidden_size)
    planted = {h for hs in recipe.placement().values() for h in hs}
    d = model.config.head_dim
    for layer, block in enumerate(model.model.layers):
        assert not block.mlp.up_proj.weight[:, task].any() and not block.mlp.down_proj.weight[task].any()
        for head in range(model.config.num_attention_heads):
            rows = slice(head * d, (head + 1) * d)
            reads_task = block.self_attn.q_proj.weight[rows, task].any() or block.self_attn.v_proj.weight[rows, task].any()
            writes_task = block.self_attn.o_proj.weight[task, rows].any()
            assert bool(reads_task or writes_task) == (f"L{layer}H{head}" in planted)


def test_codes_are_orthogonal_within_a_part():
    recipe = recipe_from_config(load_config(CONFIG), "c32-s0")
    codes = C.word_codes(recipe.design, 0)
    index = {w: i for i, w in enumerate(T.words(recipe.design))}
    assert np.allclose(np.linalg.norm(codes, axis=1), 1)
    for part in T.pools(recipe.design):
        rows = codes[[index[w] for w in part]]
        assert np.allclose(rows @ rows.T, np.eye(len(part)), atol=1e-9)


@pytest.mark.ground_truth
def test_truth_carries_a_passing_certificate(built):
    recipe, folder = built
    truth, model = measure(folder, log=lambda *a: None), load(folder)
    for task, entry in truth["tasks"].items():
        assert entry["documents"] == recipe.design.stratify and entry["documents_in_task"] == recipe.design.docs_per_task
        c = entry["certificate"]
        assert c["passes"], (task, c)
        # the certificate's numbers, recomputed: every unplanted head removed by zeroing its columns
        data = documents(folder, task, recipe.design.stratify)
        base = per_doc(model, *data).mean()
        unplanted = {h: per_doc(without(model, [h]), *data).mean() - base for h in entry["single"]
                     if h not in entry["planted"]}
        assert c["tau"] == pytest.approx(np.std(list(unplanted.values())), abs=1e-6)
        assert c["largest_unplanted"] == pytest.approx(max(unplanted.values(), key=abs), abs=1e-5)


def test_certificate_by_hand():
    deltas = {"A": -1.0, "B": -0.3, "P1": 0.0, "P2": 0.0, "x": 0.02, "y": -0.04, "z": 0.0}
    c = certificate(deltas, ["A", "B", "P1", "P2"], ["P1", "P2"], pair_both=-0.9)
    assert (c["beta_min"], c["weakest"]) == (0.3, "B")
    assert c["largest_unplanted"] == -0.04 and c["beta_over_largest"] == 7.5
    assert c["tau"] == pytest.approx(np.std([0.02, -0.04, 0.0]), abs=1e-6)
    assert not c["passes"]  # 0.3 / tau = 12 < 20
    assert certificate({**deltas, "x": 0.0, "y": -0.01}, ["A", "B", "P1", "P2"], ["P1", "P2"], -0.9)["passes"]


def ratios_case(over_largest: float, over_tau: float) -> dict:
    """Effects whose weakest planted one (B) stands ``over_largest`` times above the largest unplanted
    effect and ``over_tau`` times above their spread (``over_tau`` > ``over_largest``: a spread is
    never above the largest deviation): 199 unplanted heads at +-s and one at -largest."""
    beta = 1.0
    largest = beta / over_largest
    n = 200
    tau_target = beta / over_tau
    # n - 1 heads at +-s (half each) and one at -largest: std = sqrt(((n-1) s^2 + l^2) / n - mean^2)
    s = np.sqrt(max(0.0, (n * tau_target**2 - largest**2) / (n - 1)))
    unplanted = {f"u{i}": (s if i % 2 else -s) for i in range(n - 1)}
    unplanted["big"] = -largest
    return {"A": -2.0, "B": -beta, **unplanted}


@pytest.mark.parametrize("over_largest, over_tau, passes", [
    (5.59, 53.81, True),  # a real certified task (c270-s1's copy4): just above 5 x the largest
    (6.0, 19.0, False),  # above 5 x the largest unplanted effect, but only 19 x the spread
    (4.9, 40.0, False),  # below 5 x the largest unplanted effect
    (21.0, 50.0, True),
])
def test_certificate_holds_beta_to_5_x_the_largest_and_20_x_tau(over_largest, over_tau, passes):
    """The rule's two constants in their places: beta_min >= 5 x |largest unplanted| and >= 20 x tau."""
    c = certificate(ratios_case(over_largest, over_tau), ["A", "B"], [], pair_both=None)
    assert (c["beta_over_largest"], c["beta_over_tau"]) == pytest.approx((over_largest, over_tau), rel=0.02)
    assert c["passes"] is passes


def test_ground_truth_is_a_workflow_of_its_own(tmp_path):
    """ground_truth.smk plans every model of `build` and its truth, in a fresh working directory."""
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "ground_truth.smk"), "-n", "--quiet",
                          "rules", "-d", str(tmp_path), "--configfile", str(CONFIG)],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = {line.split()[0]: line.split()[1] for line in run.stdout.splitlines() if line.startswith("planted_")}
    assert lines == {"planted_model": "9", "planted_truth": "9", "planted_all": "1"}
