"""Sequential searches resume from any point of their record (headloc.search.sequential)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from headloc.search.group_testing import GroupTesting
from headloc.search.simulate import make_world
from headloc.search.thompson import ThompsonSampling

WORLD = make_world(seed=4, n_heads=128, tau=0.02)
SEARCHES = {
    "group testing": GroupTesting(128, 40, seed=4, k=5, extra_heads=0),
    "group testing in rounds": GroupTesting(128, 40, seed=4, k=5, masks_per_round=3, extra_heads=0),
    "thompson": ThompsonSampling(128, 24, seed=4, sparsity=0.05, reward="damage",
                                 score_range=(math.log(1 / 4), 0.0), masks_per_round=2),
}


def continue_from(search, masks, scores):
    """What a job does after reloading its record: ask, score, append, until done."""
    while (batch := search.next_masks(masks, scores)) is not None:
        scored = {row.tobytes() for row in masks}
        assert len(batch) and all(row.tobytes() not in scored for row in batch)  # nothing scored twice
        assert len({row.tobytes() for row in batch}) == len(batch)
        masks, scores = np.vstack([masks, batch]), np.concatenate([scores, WORLD.score(batch)])
        assert len(masks) <= search.n_masks
    return masks, scores


@pytest.mark.parametrize("name", SEARCHES)
def test_a_record_cut_anywhere_resumes_to_the_same_record_and_result(name):
    search = SEARCHES[name]
    masks, scores, found = search.complete(WORLD.score)
    assert len(masks) > 20 and not masks[0].any()
    for cut in range(len(masks) + 1):
        resumed_masks, resumed_scores = continue_from(search, masks[:cut], scores[:cut])
        assert np.array_equal(resumed_masks, masks) and np.array_equal(resumed_scores, scores)
    again = search.recover(masks, scores)
    assert np.array_equal(again.ranking, found.ranking) and np.array_equal(again.coef, found.coef)
    assert again.labels == found.labels and again.n_evals == found.n_evals == len(masks)


@pytest.mark.parametrize("name", SEARCHES)
def test_a_live_search_replays_once_and_goes_on_round_by_round(name, monkeypatch):
    # A job replays its record once and then feeds each round's scores into the running search:
    # the same record and result as an uninterrupted run, from any cut, with one replay per job (a
    # replay per round made a search of R rounds cost R^2 / 2 proposals).
    search = SEARCHES[name]
    masks, scores, found = search.complete(WORLD.score)
    plans = []
    original = type(search).propose
    monkeypatch.setattr(type(search), "propose", lambda self: plans.append(1) or original(self))
    for cut in (0, 1, len(masks) // 2, len(masks) - 1, len(masks)):
        plans.clear()
        live, rows, values = search.resume(masks[:cut], scores[:cut]), [masks[:cut]], [scores[:cut]]
        while live.pending is not None:
            rows.append(live.pending)
            values.append(WORLD.score(live.pending))
            live.advance(values[-1])
        assert np.array_equal(np.vstack(rows), masks) and np.array_equal(np.concatenate(values), scores)
        assert np.array_equal(live.found.ranking, found.ranking) and live.found.n_evals == found.n_evals
        assert len(plans) == 1
    with pytest.raises(ValueError, match="the search is done: no masks are pending"):
        live.advance([0.0])


def test_a_live_search_refuses_scores_that_do_not_fit_its_round():
    live = SEARCHES["group testing"].resume(np.zeros((0, 128)), [])
    with pytest.raises(ValueError, match=f"2 scores for {len(live.pending)} pending masks"):
        live.advance([0.5, 0.4])
    with pytest.raises(ValueError, match="scores must be finite numbers"):
        live.advance(np.full(len(live.pending), np.nan))


def test_a_record_of_other_settings_or_unfinished_is_refused():
    search = SEARCHES["group testing"]
    masks, scores, _ = search.complete(WORLD.score)
    with pytest.raises(ValueError, match="not the masks this search proposes"):
        GroupTesting(128, 40, seed=5, k=5, extra_heads=0).next_masks(masks, scores)
    with pytest.raises(ValueError, match="unfinished: .* more to score"):
        search.recover(masks[:-1], scores[:-1])
    with pytest.raises(ValueError, match="3 masks but 2 scores"):
        search.next_masks(masks[:3], scores[:2])
    with pytest.raises(ValueError, match="search ended after"):
        search.next_masks(np.vstack([masks, masks[-1:]]), np.append(scores, 0.0))


def test_the_sequential_step_replays_its_record_once_per_job(tmp_path, monkeypatch):
    """sequential.sequential (rule search_job, the driver): one plan per job, fresh or resumed,
    and the same record either way."""
    import logging

    from headloc.heads import HeadGeometry
    from headloc.methods import get, steps
    from headloc.methods.kinds import sequential

    params = sequential.SequentialParams("group_testing", 40, 4, 5, 0.05, {})
    plans = []
    original = GroupTesting.propose
    monkeypatch.setattr(GroupTesting, "propose", lambda self: plans.append(1) or original(self))
    log = logging.getLogger("test")
    first = sequential.sequential(params, HeadGeometry(8, 16), WORLD.score, tmp_path / "a.npz", tmp_path / "a.json", log)
    assert len(plans) == 1 and first["n_evals"] > 10
    record = np.load(tmp_path / "a.npz")
    cut = {key: record[key][: first["n_evals"] // 2] if key in ("masks", "scores") else record[key]
           for key in record.files}
    np.savez(tmp_path / "b.npz", **cut)  # a job killed half-way
    plans.clear()
    rows = []
    counted = lambda masks: rows.extend(masks) or WORLD.score(masks)  # noqa: E731
    again = sequential.sequential(params, HeadGeometry(8, 16), counted, tmp_path / "b.npz", tmp_path / "b.json", log)
    assert len(plans) == 1 and again == first
    assert len(rows) == first["n_evals"] - first["n_evals"] // 2  # only what the killed job had not scored


def test_recovery_json_names_the_heads_a_search_keeps_in_its_details():
    from headloc.heads import HeadGeometry
    from headloc.methods.kinds.sequential import sequential_fields

    names = HeadGeometry(8, 16).names
    for name in ("group testing", "thompson"):
        found = SEARCHES[name].complete(WORLD.score)[2]
        details = sequential_fields(found, names)["details"]
        fields = sequential_fields(found, names)
        if name == "group testing":
            assert fields["confirmed"] == [names[i] for i in found.confirmed] and details["group_size"] == SEARCHES[name].size == 8
            assert fields["confirmed"] == fields["ranking"][: len(found.confirmed)]
            assert all(fields["labels"][head] == "confirmed" for head in fields["confirmed"])
        else:
            assert fields["confirmed"] is None  # Thompson sampling ablates no head alone
            assert list(details["a"]) == names and details["a"]["L0H3"] == found.details["a"][3]
            assert details["b"]["L7H15"] == found.details["b"][127] and details["iterations"] == found.details["iterations"]


def test_a_search_stopped_at_its_cap_warns_in_the_log_and_in_recovery_json(tmp_path, caplog):
    """Rule search_job's step and checkpoint recover_heads' (the driver's too): a group
    testing search capped before its top k are confirmed logs a warning naming the cap and the
    unconfirmed heads, and recovery.json carries it in ``warnings`` with the ``confirmed`` heads."""
    import logging

    from headloc.heads import HeadGeometry
    from headloc.io import read_json
    from headloc.methods import get, steps
    from headloc.methods.kinds import sequential

    geometry, log = HeadGeometry(8, 16), logging.getLogger("test_cap")
    params = sequential.SequentialParams("group_testing", 20, 4, 5, 0.05, {})
    with caplog.at_level(logging.WARNING, logger="test_cap"):
        sequential.sequential(params, geometry, WORLD.score, tmp_path / "r.npz", tmp_path / "s.json", log)
    recovery = steps.recover(steps.RecoverParams("group_testing", 0.001, 4, 5), steps.RecoverInputs(result=str(
        tmp_path / "s.json")), geometry, log)
    top, confirmed = recovery["top_heads"], recovery["confirmed"]
    unconfirmed = [head for head in top if head not in confirmed]
    assert recovery["n_evals"] == 20 and 0 < len(unconfirmed) < 5  # 17 masks score the partition of 16
    assert recovery["warnings"] == read_json(tmp_path / "s.json")["warnings"]
    (warning,) = recovery["warnings"]
    assert warning.startswith(f"group_testing stopped at its cap of 20 evaluations, with {5 - len(unconfirmed)} of "
                              "its top 5 heads confirmed; not confirmed: ")
    assert all(f"{head} ({recovery['labels'][head]})" in warning for head in unconfirmed)
    assert not any(head in warning.split("not confirmed:")[1].split() for head in confirmed)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # both steps; and the world's scores are one number per set (no documents): its heads are not assessed
    assert [w for w in warned if not w.startswith("heads not assessed: ")] == [warning, warning]
    assert len(warned) == 3 and "heads not assessed: the scores are not means over documents" in warned[1]
    complete = sequential.sequential(replace(params, n_masks=100), geometry, WORLD.score, tmp_path / "c.npz",
                                tmp_path / "c.json", log)
    assert complete["warnings"] == [] and complete["confirmed"] == complete["ranking"][:len(complete["confirmed"])]
