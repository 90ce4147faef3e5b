"""The certified planted family (issue 31): a constructed model, its certificate, its own workflow.

Two small constructed models (the c32 recipe and the i32 recipe, whose design has interactions,
each with 60 text steps, about 35 s) are built once per module by the tests marked
``ground_truth`` (``make test-ground-truth``; ``make test`` runs the rest). What they must be is
checked with code of the test's own: heads are removed by zeroing the output projection's columns
that read them (not headloc's gate hooks), documents are tokenised by splitting on spaces from the
saved vocabulary, and scores are the gold's log-probability among the choices.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from headloc.groundtruth import construct_layout as C
from headloc.groundtruth import tasks as T
from headloc.groundtruth.build import build
from headloc.groundtruth.certificates import certificate, interaction_certificate
from headloc.groundtruth.design import Design
from headloc.groundtruth.recipe import load_config, recipe_from_config
from headloc.groundtruth.truth import measure, planted_sets

from checkpoint_checks import documents, gold_logprobs, load, parse, read_docs, without

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "ground_truth.yaml"


def build_short(name: str, tmp_path_factory):
    """Model ``name`` of the config with 60 text steps, built into a fresh folder."""
    recipe = recipe_from_config(load_config(CONFIG), name)
    recipe = dataclasses.replace(recipe, size=dataclasses.replace(recipe.size, steps=60))
    folder = build(recipe, tmp_path_factory.mktemp(name) / "model", threads=1, log=lambda *a: None)
    return recipe, folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_short("c32-s0", tmp_path_factory)


@pytest.fixture(scope="module")
def interacting(tmp_path_factory):
    """The interaction design on the c32 geometry, and its measured truth."""
    recipe, folder = build_short("i32-s0", tmp_path_factory)
    return recipe, folder, measure(folder, log=lambda *a: None)


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


def test_the_certified_recipes_keep_their_digests():
    """The digests the certified models were built and measured under (docs/ground-truth.md): a recipe
    key added for other designs must leave them as they were, or every built model would be rebuilt."""
    config = load_config(CONFIG)
    digests = {name: recipe_from_config(config, name).digest() for name in
               [f"c{n}-s{seed}" for n in (32, 270, 1024) for seed in range(3)]}
    assert digests == {"c32-s0": "d3e7f02f86ee", "c32-s1": "dc24d9a50e2e", "c32-s2": "6eca77969ce6",
                       "c270-s0": "73be0384501b", "c270-s1": "49aecebabdf9", "c270-s2": "961a5ed99b41",
                       "c1024-s0": "7d595f2866a6", "c1024-s1": "6db1cfd7c636", "c1024-s2": "123abc59ff71"}


def test_an_interactions_two_heads_sit_in_two_layers_above_the_universal_head():
    config = load_config(CONFIG)
    for name in [f"i{n}-s{seed}" for n in (32, 270, 1024) for seed in range(3)]:
        recipe = recipe_from_config(config, name)
        placement = recipe.placement()
        universal = parse(placement["universal"][0])[0]
        for role in recipe.design.interactions:
            first, second = (parse(h)[0] for h in placement[role])
            assert universal < first < second, (name, role, placement[role])
        heads = [h for hs in placement.values() for h in hs]
        assert len(set(heads)) == len(heads) == 9, name


@pytest.mark.parametrize("spec, message", [
    ({"kind": "chain"}, "interaction of role bk: kind 'chain' is not one of backup, redundant, synergy"),
    ({"kind": "backup"}, "a backup needs a strength between 0 and 1 .* not None"),
    ({"kind": "backup", "strength": 1.0}, "a backup needs a strength between 0 and 1 .* not 1.0"),
    ({"kind": "redundant", "strength": 0.5}, "a redundant pair copies at full strength; strength is for backup only"),
    ({"kind": "synergy", "gate": 2}, r"unknown keys \['gate'\]; known: kind, strength"),
    ("synergy", "'synergy' is not a mapping such as {kind: synergy}"),
])
def test_a_bad_interaction_is_refused_with_what_would_be_valid(spec, message):
    design = dict(load_config(CONFIG)["designs"]["interactions"])
    design["interactions"] = {**design["interactions"], "bk": spec}
    with pytest.raises(ValueError, match=message):
        Design.from_dict(design)


def test_an_interaction_names_a_role_of_the_design():
    design = dict(load_config(CONFIG)["designs"]["interactions"])
    design["interactions"] = {**design["interactions"], "zz": {"kind": "synergy"}}
    with pytest.raises(ValueError, match=r"interaction roles \['zz'\] are not roles of any task; roles: \['a2'"):
        Design.from_dict(design)


def test_the_frozen_scheme_refuses_interactions():
    from headloc.groundtruth.build import train

    recipe = recipe_from_config(load_config(CONFIG), "i32-s0")
    frozen = dataclasses.replace(recipe, training=load_config(CONFIG)["trainings"]["frozen"])
    with pytest.raises(ValueError, match=r"i32-s0: interactions \(\['bk', 'rd', 'sy'\]\) are written by scheme "
                                         "constructed only"):
        train(frozen)


@pytest.mark.parametrize("name", ["c32-s0", "i32-s0"])
def test_codes_are_orthogonal_within_a_part(name):
    recipe = recipe_from_config(load_config(CONFIG), name)
    codes = C.word_codes(recipe.design, 0)
    index = {w: i for i, w in enumerate(T.words(recipe.design))}
    assert np.allclose(np.linalg.norm(codes, axis=1), 1)
    for part in T.pools(recipe.design):
        rows = codes[[index[w] for w in part]]
        assert np.allclose(rows @ rows.T, np.eye(len(part)), atol=1e-9)
    # with interactions the last code dim is every head's flag carrier: no word may write into it
    assert not codes[:, C.CODE - 1].any() if recipe.design.interactions else codes[:, C.CODE - 1].any()


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


@pytest.mark.parametrize("target, models", [([], 18), (["planted_held_out"], 6)])
def test_ground_truth_is_a_workflow_of_its_own(tmp_path, target, models):
    """ground_truth.smk plans every model of `build` (or of `held_out`, the placements no search is
    tuned on) and its truth, in a fresh working directory."""
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "ground_truth.smk"), *target, "-n",
                          "--quiet", "rules", "-d", str(tmp_path), "--configfile", str(CONFIG)],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = {line.split()[0]: line.split()[1] for line in run.stdout.splitlines() if line.startswith("planted_")}
    final = target[0] if target else "planted_all"
    assert lines == {"planted_model": str(models), "planted_truth": str(models), final: "1"}


def planned(work, *target, pythonpath=None):
    """The rules a dry run of ground_truth.smk in ``work`` would run, and the reason it gives each."""
    env = {**os.environ, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "ground_truth.smk"), *target, "-n",
                          "-d", str(work)], cwd=REPO, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rules = re.findall(r"^rule (\w+):\n(?:    .*\n)*?    reason: (.*)$", run.stdout, flags=re.M)
    return dict(rules)


def test_a_planted_job_is_known_by_its_code(tmp_path):
    """Each job of ground_truth.smk re-runs when a headloc module its script imports changes, and
    only then: a build when the builder's code changes, a truth when the truth's does."""
    work, model = tmp_path / "work", "c32-s0"
    target = f"results/planted/{model}/truth.json"
    for name in ("model/config.json", "truth.json", "truth.md"):  # stand-ins, recorded as made by the rules
        (work / "results" / "planted" / model / name).parent.mkdir(parents=True, exist_ok=True)
        (work / "results" / "planted" / model / name).write_text("{}")
    subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "ground_truth.smk"), target, "--touch",
                    "--forceall", "--cores", "1", "-d", str(work)], cwd=REPO, check=True, capture_output=True)
    assert planned(work, target) == {}
    for module, changed, rules in (("groundtruth/truth.py", "planted_truth", {"planted_truth"}),
                                   ("groundtruth/construct.py", "planted_model", {"planted_model", "planted_truth"})):
        library = tmp_path / module.replace("/", "-")
        shutil.copytree(REPO / "src" / "headloc", library / "headloc")
        with open(library / "headloc" / module, "a") as edited:
            edited.write("\n# an edit\n")
        jobs = planned(work, target, pythonpath=library)
        assert set(jobs) == rules and jobs[changed].startswith("Params have changed"), (module, jobs)


# ------------------------------------------------------------------ interactions


def interaction(interacting, kind):
    """(the model, first head, second head, the task's documents, the model's per-document scores on
    them) of the interacting design's interaction of ``kind``."""
    recipe, folder, _ = interacting
    design = recipe.design
    role = next(r for r, i in design.interactions.items() if i.kind == kind)
    task = next(t for t, kinds in design.tasks.items() if any(k.role == role for k in kinds))
    first, second = recipe.placement()[role]
    model, data = load(folder), documents(folder, task, design.stratify)
    return model, first, second, data, per_doc(model, *data)


@pytest.mark.ground_truth
def test_a_backup_head_copies_only_once_its_primary_is_gone(interacting):
    model, primary, backup, data, base = interaction(interacting, "backup")
    assert base.mean() > -0.05  # answered
    assert np.abs(per_doc(without(model, [backup]), *data) - base).max() < 1e-6  # the backup alone: nothing
    no_primary = per_doc(without(model, [primary]), *data).mean()
    assert -1.0 < no_primary < base.mean() - 0.1  # the backup copies at part strength: a measurable drop
    assert per_doc(without(model, [primary, backup]), *data).mean() < min(-1.0, no_primary - 0.5)  # both: chance


@pytest.mark.ground_truth
def test_a_redundant_pair_does_nothing_alone_and_everything_together(interacting):
    model, first, second, data, base = interaction(interacting, "redundant")
    assert base.mean() > -0.05
    for head in (first, second):  # either alone: every document as it was
        assert np.abs(per_doc(without(model, [head]), *data) - base).max() < 1e-5, head
    assert per_doc(without(model, [first, second]), *data).mean() < -1.0


@pytest.mark.ground_truth
def test_a_synergy_pair_breaks_the_task_without_either_head(interacting):
    model, first, second, data, base = interaction(interacting, "synergy")
    assert base.mean() > -0.05
    for heads in ([first], [second], [first, second]):
        assert per_doc(without(model, heads), *data).mean() < -1.0, heads


@pytest.mark.ground_truth
def test_truth_certifies_every_interaction_as_measured(interacting):
    recipe, folder, truth = interacting
    model = load(folder)
    kinds = {}
    for task, entry in truth["tasks"].items():
        assert entry["certificate"]["passes"], (task, entry["certificate"])
        data = documents(folder, task, recipe.design.stratify)
        base = per_doc(model, *data).mean()
        for found in entry.get("interactions", []):
            kinds[found["kind"]] = task
            role = recipe.design.interactions[found["role"]]
            assert found["kind"] == role.kind and found["heads"] == recipe.placement()[found["role"]]
            assert found["passes"], found
            for head in found["heads"]:  # the effects, recomputed by zeroing output columns
                assert found["alone"][head] == pytest.approx(per_doc(without(model, [head]), *data).mean() - base,
                                                             abs=2e-5)
            assert found["both"] == pytest.approx(per_doc(without(model, found["heads"]), *data).mean() - base,
                                                  abs=2e-5)
    assert sorted(kinds) == ["backup", "redundant", "synergy"]


def tail(binds: str) -> dict:
    """Unplanted single effects whose largest is 0.01 (signed as given) and whose tau binds or not:
    "largest": 99 heads at 0 and one at -0.01 (tau = 0.01 sqrt(99) / 100 = 0.000995, so 20 tau = 0.0199
    < 5 x 0.01 = 0.05); "tau": 3 heads at 0 and one at +0.01 (tau = 0.01 sqrt(3) / 4 = 0.00433, 20 tau
    = 0.0866 > 0.05)."""
    if binds == "largest":
        return {**{f"u{i}": 0.0 for i in range(99)}, "big": -0.01}
    return {"u0": 0.0, "u1": 0.0, "u2": 0.0, "big": 0.01}


TAU = {"largest": 0.01 * np.sqrt(99) / 100, "tau": 0.01 * np.sqrt(3) / 4}


def checked(kind, binds, first, second, both):
    deltas = {**tail(binds), "P": first, "B": second}
    return interaction_certificate(kind, ["P", "B"], deltas, both, planted=["U", "P", "B"])


@pytest.mark.parametrize("binds, primary, backup_alone, given_primary, passes", [
    ("largest", 0.0501, 0.99, 0.0501, True),  # 5.01 x the largest, each; the backup alone at 0.99 tau
    ("largest", 0.0499, 0.99, 0.0501, False),  # the primary alone below 5 x the largest
    ("largest", 0.0501, 0.99, 0.0499, False),  # the backup once the primary is gone: below 5 x the largest
    ("largest", 0.0501, 1.01, 0.0501, False),  # the backup alone at tau or more
    ("largest", 0.0501, -1.01, 0.0501, False),  # ... whichever its sign
    ("tau", 0.0867, 0.99, 0.0867, True),  # 20.02 x tau (0.0866), each
    ("tau", 0.0865, 0.99, 0.0867, False),  # the primary below 20 x tau
    ("tau", 0.0867, 0.99, 0.0865, False),  # the backup once the primary is gone: below 20 x tau
])
def test_the_backup_certificate_by_hand(binds, primary, backup_alone, given_primary, passes):
    """primary alone >= 5 x |largest| and >= 20 x tau; |backup alone| < tau; both - primary alone as the primary."""
    tau = TAU[binds]
    c = checked("backup", binds, -primary, -backup_alone * tau, -primary - given_primary)
    assert c["tau"] == pytest.approx(tau, abs=1e-6) and c["largest_unplanted"] == pytest.approx(
        -0.01 if binds == "largest" else 0.01)
    assert [check["effect"] for check in c["checks"]] == pytest.approx(
        [primary, backup_alone * tau, given_primary], abs=1e-5)
    assert c["passes"] is passes, c["checks"]


@pytest.mark.parametrize("binds, alone, both, passes", [
    ("largest", (0.99, -0.99), 0.0501, True),  # each alone below tau, together 5.01 x the largest
    ("largest", (1.01, 0.0), 0.0501, False),  # one head alone at tau: not redundant
    ("largest", (0.0, -1.01), 0.0501, False),
    ("largest", (0.0, 0.0), 0.0499, False),  # together below 5 x the largest
    ("tau", (0.0, 0.0), 0.0865, False),  # together below 20 x tau
    ("tau", (0.5, 0.5), 0.0867, True),
])
def test_the_redundant_certificate_by_hand(binds, alone, both, passes):
    """|each alone| < tau; both >= 5 x |largest| and >= 20 x tau."""
    tau = TAU[binds]
    assert checked("redundant", binds, -alone[0] * tau, -alone[1] * tau, -both)["passes"] is passes


@pytest.mark.parametrize("binds, first, second, passes", [
    ("largest", 0.0501, 1.0, True),
    ("largest", 0.0499, 1.0, False),  # the first alone below 5 x the largest
    ("largest", 1.0, 0.0499, False),
    ("tau", 0.0867, 0.0867, True),
    ("tau", 0.0865, 1.0, False),  # below 20 x tau
    ("tau", 1.0, 0.0865, False),
])
def test_the_synergy_certificate_by_hand(binds, first, second, passes):
    """each alone >= 5 x |largest| and >= 20 x tau (an AND: each head alone breaks the task)."""
    assert checked("synergy", binds, -first, -second, -max(first, second))["passes"] is passes


def test_planted_sets_leave_only_backups_and_redundant_heads_to_their_interactions():
    """Per task, the heads meant to do nothing alone (``quiet``: out of the task certificate's beta_min)
    are a backup's second head and both heads of a redundant pair; a synergy's heads each matter."""
    recipe = recipe_from_config(load_config(CONFIG), "i32-s0")
    placement = recipe.placement()
    sets = planted_sets(recipe.design, placement)
    assert {task: sets[task]["quiet"] for task in sets} == {
        "copy2": [], "backup2": [placement["bk"][1]], "redundant": placement["rd"], "synergy": []}
    assert sets["synergy"]["interactions"] == [{"kind": "synergy", "role": "sy", "heads": placement["sy"]}]
    assert sets["synergy"]["heads"] == [*placement["universal"], *placement["sy"]]


def test_an_unknown_interaction_kind_is_refused():
    with pytest.raises(ValueError, match="interaction kind 'chain' is not one of backup, redundant, synergy"):
        checked("chain", "tau", -1.0, -1.0, -1.0)


def test_the_task_certificate_leaves_heads_meant_to_do_nothing_alone_to_their_interactions():
    deltas = {**tail("largest"), "U": -2.0, "A": -0.3, "P": -0.2, "B": 0.0, "R1": 0.0, "R2": 0.0}
    planted = ["U", "A", "P", "B", "R1", "R2"]
    c = certificate(deltas, planted, [], None, quiet=("B", "R1", "R2"))
    assert (c["beta_min"], c["weakest"], c["passes"]) == (0.2, "P", True)
    assert not certificate(deltas, planted, [], None)["passes"]  # counted alone, the backup head (0) fails it
