"""Gradient-guided greedy as its job runs it (headloc.methods.kinds.guided.guided, the one call of rule
search_job's script) on the planted tiny model (tests/planted.py): its heads against greedy's,
computed here from plain forward passes; its values against the scores measured here; a job killed
mid-way resumes from its record to the uninterrupted result, scoring no recorded head set and
taking no recorded gradient again; a record of other inputs is not resumed."""

import logging
import math

import numpy as np
import pytest
from planted import N_HEADS, N_LAYERS, planted_examples, planted_model, reference_score

from headloc.heads import HeadGeometry, head_name
from headloc.methods.kinds import guided
from headloc.model.ablation import masks_to_gate
from headloc.search.attribution import attribution

GEOMETRY = HeadGeometry(N_LAYERS, N_HEADS)
LOG = logging.getLogger("test_guided_resume")
K = 3


@pytest.fixture(scope="module")
def model():
    """The planted model as trained: its planted head and the noise heads all move the task a little."""
    return planted_model()


@pytest.fixture(scope="module")
def examples():
    return planted_examples(12)


def scorer(model, examples, spent: list):
    """``score(masks)``: each mask's mean gold log-likelihood, measured here; every mask appended to ``spent``."""
    def score(masks):
        spent.extend("".join(map(str, row)) for row in masks)
        return np.array([reference_score(model, examples, masks_to_gate(row, GEOMETRY)) for row in masks])
    return score


def run(model, examples, folder, spent, options, *, key="inputs", higher_is_better=True, score=None):
    params = guided.GuidedParams("guided_greedy", K, options, higher_is_better)
    return guided.guided(params, GEOMETRY, score or scorer(model, examples, spent), model, examples, 4,
                         folder / "record.npz", folder / "guided.json", LOG, key=key)


def greedy(model, examples, k: int) -> list[int]:
    """Greedy as the paper defines it, here: each round every other head ablated beside the heads
    chosen so far, the lowest score joins."""
    chosen = []
    for _ in range(k):
        def with_(h):
            mask = np.zeros(GEOMETRY.total, dtype=np.int8)
            mask[chosen + [h]] = 1
            return reference_score(model, examples, masks_to_gate(mask, GEOMETRY))
        chosen.append(min((h for h in range(GEOMETRY.total) if h not in chosen), key=with_))
    return chosen


def test_listing_every_head_it_is_greedy_and_its_values_are_the_measured_changes(model, examples, tmp_path):
    spent = []
    found = run(model, examples, tmp_path, spent, {"m": GEOMETRY.total, "m_abs": 0, "carry": 0})
    names = [head_name(h, N_HEADS) for h in greedy(model, examples, K)]
    assert found["ranking"][:K] == names and found["confirmed"] == names
    unablated = reference_score(model, examples)
    first = np.eye(GEOMETRY.total, dtype=np.int8)[int(names[0][1]) * N_HEADS + int(names[0][3])]
    alone = reference_score(model, examples, masks_to_gate(first, GEOMETRY))
    assert found["coef"][names[0]] == pytest.approx(alone - unablated, abs=1e-9)
    assert found["intercept"] == pytest.approx(unablated, abs=1e-9)
    # 8 + 7 + 6 head sets and the unablated model, each scored once; three gradients on top
    distinct = 1 + 8 + 7 + 6
    assert len(spent) == len(set(spent)) == distinct == found["details"]["masked_evaluations"]
    # the gradients' worth as attribution counts it, beside the heads chosen before each step
    chosen = [int(name[1]) * N_HEADS + int(name[3]) for name in names]
    worth = sum(attribution(model, examples, background=chosen[:step]).cost.eval_equivalent for step in range(K))
    assert found["n_evals"] == distinct + math.ceil(worth)
    assert found["details"]["gradient_passes"] == K
    assert [step["chosen"] for step in found["details"]["steps"]] == names
    # each step's estimate is attribution's beside exactly the heads chosen before it
    with np.load(tmp_path / "record.npz") as record:
        backgrounds, estimates = record["backgrounds"], record["estimates"]
    assert [sorted(np.flatnonzero(row)) for row in backgrounds] == [sorted(chosen[:step]) for step in range(K)]
    for step, estimate in enumerate(estimates):
        beside = attribution(model, examples, background=chosen[:step]).effects
        assert estimate == pytest.approx(-beside, rel=1e-5, abs=1e-5)  # float32 gradients
        assert step == 0 or not np.allclose(beside, attribution(model, examples).effects, atol=1e-6)


def test_a_lower_is_better_score_chooses_the_same_heads(model, examples, tmp_path):
    options = {"m": 3, "m_abs": 1, "carry": 1}
    expected = run(model, examples, tmp_path / "a", [], options)
    spent = []
    loss = scorer(model, examples, spent)
    found = run(model, examples, tmp_path / "b", [], options, higher_is_better=False,
                score=lambda masks: -loss(masks))
    assert found["ranking"][:K] == expected["ranking"][:K]
    assert found["coef"] == pytest.approx(expected["coef"], abs=1e-9), "oriented: a damage is negative either way"


class Killed(Exception):
    """The job's end mid-way (what SIGKILL does after the record was written)."""


@pytest.mark.parametrize("stop", ["scoring", "gradient"])
def test_a_killed_guided_search_resumes_to_the_same_result(stop, model, examples, tmp_path, monkeypatch):
    options = {"m": 3, "m_abs": 1, "carry": 1}
    reference = tmp_path / "reference"
    expected = run(model, examples, reference, [], options)

    from headloc.search import attribution as module
    original, gradients = module.attribution, []

    def counted(*args, **kwargs):
        gradients.append(tuple(kwargs["background"]))
        if stop == "gradient" and len(gradients) == 3:
            raise Killed
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "attribution", counted)
    spent, calls = [], []
    measured = scorer(model, examples, spent)

    def dying(masks):
        calls.append(len(masks))
        if stop == "scoring" and len(calls) == 3:
            raise Killed
        return measured(masks)

    folder = tmp_path / "killed"
    with pytest.raises(Killed):
        run(model, examples, folder, spent, options, score=dying)
    assert not (folder / "guided.json").exists()
    before, taken = list(spent), list(gradients)
    found = run(model, examples, folder, spent, options)  # the rerun of the killed job
    again = spent[len(before):]
    assert not set(before) & set(again), "a recorded head set was scored again"
    assert len(set(spent)) == len(spent) == expected["details"]["masked_evaluations"]
    finished = [background for background in taken if stop != "gradient" or background != taken[-1]]
    assert not set(finished) & set(gradients[len(taken):]), "a recorded gradient was taken again"
    assert found == expected


def test_a_record_of_other_inputs_is_not_resumed(model, examples, tmp_path):
    options = {"m": 3, "m_abs": 1, "carry": 1}
    first, spent = run(model, examples, tmp_path, [], options), []
    again = run(model, examples, tmp_path, spent, options)
    assert spent == [] and again == first, "the same search's record: nothing scored again"
    other = run(model, examples, tmp_path, spent, options, key="other documents")
    assert len(spent) == first["details"]["masked_evaluations"] and other == first


def test_heads_rank_in_the_order_chosen_even_where_a_later_gain_is_larger(model, examples, tmp_path):
    """A backup head (its drop appears only once its primary is ablated) joins second with a larger
    gain than the first head's: greedy's order, not the values', is the ranking."""
    def score(masks):  # head 1 hurts alone (0.5); head 6 only beside head 1 (1.0); head 3 a little
        return np.array([1.0 - 0.5 * row[1] - 1.0 * row[1] * row[6] - 0.1 * row[3] for row in masks])

    found = run(model, examples, tmp_path, [], {"m": GEOMETRY.total, "m_abs": 0, "carry": 0}, score=score)
    names = [head_name(h, N_HEADS) for h in (1, 6, 3)]
    assert found["ranking"][:K] == names
    assert [found["coef"][n] for n in names] == pytest.approx([-0.5, -1.0, -0.1])
