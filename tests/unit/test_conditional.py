"""Conditional group testing (headloc.search.conditional) on simulated worlds whose heads act alone,
beside others (a backup head), only together (a redundant pair) or as an AND (a synergy pair),
against group testing and greedy; the worlds themselves (headloc.search.simulate_interactions); the
method's declaration; resuming a killed search."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from headloc.methods import driver, get
from headloc.methods.contract import SearchParts
from headloc.methods.settings import SearchSettings
from headloc.heads import HeadGeometry, head_name
from headloc.search.conditional import ConditionalGroupTesting
from headloc.search.conditional_pairs import confirm_pair, locate_pair, screen_pairs
from headloc.search.conditional_state import Found, Probe, Stage
from headloc.search.group_leads import Noise
from headloc.search.group_testing import GroupTesting
from headloc.search.simulate_interactions import (KINDS, compare_interactions, greedy_run, interaction_table,
                                                  make_interaction_world, recall_by_kind, search_bounds)

REPO = Path(__file__).resolve().parents[2]
TAU = 0.01


def drop(world, *heads) -> float:
    rows = np.zeros((2, len(world.tail)))
    rows[1, list(heads)] = 1
    unablated, ablated = world.score(rows)
    return float(unablated - ablated)


def doc_drop(world, n_docs: int) -> float:
    """What sending ``n_docs`` of the world's documents (any: all planted documents lie within its
    margins' range) to chance costs at most and at least, from the log-probability formula."""
    logp = -np.logaddexp(0.0, math.log(world.n_choices - 1) - world.margins)
    lost = np.sort(logp - math.log(1 / world.n_choices))
    return lost[:n_docs].sum() / len(logp), lost[-n_docs:].sum() / len(logp)


# ---------------------------------------------------------------- the worlds


def test_an_interaction_world_holds_each_kind_as_declared():
    world = make_interaction_world(seed=3, n_heads=270)
    universal, primary, *roles = world.heads_of("universal") + world.heads_of("role")
    (backup,), (a, b), (s, t) = world.heads_of("backup"), world.heads_of("redundant"), world.heads_of("synergy")
    assert world.kinds == ("universal", "role", "role", "role", "backup", "redundant", "redundant", "synergy",
                           "synergy")
    assert world.score(np.eye(270)[[universal]])[0] == pytest.approx(math.log(1 / 4))  # every document at chance
    # the backup does nothing alone and 7 of 40 documents (0.175) beside its primary
    assert drop(world, backup) == 0 and doc_drop(world, 7)[0] <= drop(world, primary, backup) - drop(world, primary)
    assert drop(world, primary, backup) - drop(world, primary) <= doc_drop(world, 7)[1]
    # the redundant pair: each alone below tau, together at least 20 tau
    assert drop(world, a) < TAU and drop(world, b) < TAU and drop(world, a, b) >= 20 * TAU
    # the synergy pair: either alone drops what both do (5 documents)
    assert drop(world, s) == drop(world, t) == drop(world, s, t) >= doc_drop(world, 5)[0] > 0
    # a tail head moves the score by about tau
    tail = [drop(world, h) for h in range(270) if h not in world.planted]
    assert 0.7 * TAU < np.std(tail) < 1.3 * TAU


def test_interaction_worlds_refuse_what_they_cannot_hold():
    with pytest.raises(ValueError, match=r"redundant pair's 2 of 20 documents drop the score by 0\.\d+ = 1\d\.\d tau together, below 20 tau: raise n_docs"):
        make_interaction_world(0, n_heads=64, n_docs=20, redundant=0.05)
    with pytest.raises(ValueError, match=r"document shares must be positive and sum to at most 1, got \[0.6, 0.5"):
        make_interaction_world(0, n_heads=64, roles=(0.6, 0.5))
    with pytest.raises(ValueError, match="a backup head needs a role head"):
        make_interaction_world(0, n_heads=64, roles=())
    world = make_interaction_world(0, n_heads=64, universal=False, backup=None, synergy=None)
    assert world.kinds == ("role",) * 3 + ("redundant",) * 2
    with pytest.raises(ValueError, match="kind must be one of universal, role, backup, redundant, synergy, got 'pair'"):
        world.heads_of("pair")


def test_recall_by_kind_counts_each_kind_in_the_top_k():
    world = make_interaction_world(1, n_heads=128)
    role = world.heads_of("role")
    others = [h for h in range(128) if h not in world.planted]
    ranking = [role[0], world.heads_of("redundant")[0], role[1], *others]
    found = recall_by_kind(ranking, world, k=2)
    assert found == {"universal": 0, "role": pytest.approx(1 / 3), "backup": 0, "redundant": 0.5, "synergy": 0}
    assert set(found) == set(KINDS)
    # without k: as many as are planted (9), which reach the second role head, not the third
    assert recall_by_kind(ranking, world)["role"] == pytest.approx(2 / 3) and len(world.planted) == 9


def test_the_two_bounds_of_the_brief():
    quantitative, binary = search_bounds(1024, 5)
    assert quantitative == pytest.approx(math.log2(math.comb(1024, 5)) / math.log2(6)) and round(quantitative) == 17
    assert binary == pytest.approx(5 * math.log2(1024 / 5) + 5) and round(binary) == 43


def test_greedy_on_a_world_is_the_workflows_rounds():
    # Each round keeps the head whose addition hurts most (a backup once its primary is kept), never
    # an excluded one; round 1 scores every head alone with the baseline, round r the N - (r - 1)
    # heads left less the excluded.
    world = make_interaction_world(2, n_heads=96)
    universal = world.heads_of("universal")
    ranking, spent = greedy_run(world, 3, exclude=universal)
    primary, backup = world.heads_of("role")[0], world.heads_of("backup")[0]
    assert ranking[:2] == [primary, backup] and universal[0] == ranking[-1]
    assert spent == 97 + (96 - 1 - 1) + (96 - 2 - 1)


# ---------------------------------------------------------------- the search


def test_a_noiseless_additive_oracle_gives_its_heads_in_greedys_order_each_joining_the_background():
    rng = np.random.default_rng(0)
    for seed in range(3):
        heads = rng.choice(1024, 5, replace=False)
        effect = np.zeros(1024)
        effect[heads] = [0.5, 0.4, 0.3, 0.2, 0.1]
        masks, scores, found = ConditionalGroupTesting(1024, 200, seed, k=5, extra_heads=0).complete(lambda m: 1.0 - m @ effect)
        assert found.ranking[:5].tolist() == heads.tolist() == found.details["background"]
        assert found.details["conditional"] == "run" and found.details["kept_out"] == []
        assert [found.labels[h] for h in heads] == ["confirmed alone"] + [
            "confirmed beside the background, and alone"] * 4
        assert found.coef[heads] == pytest.approx(-effect[heads])  # additive: beside the background = alone
        assert found.n_evals == len(masks) <= 100 and not masks[0].any()


def test_a_backup_head_is_found_beside_its_primary_where_group_testing_misses_it():
    for seed in range(4):
        world = make_interaction_world(seed, n_heads=270)
        k = len(world.planted)
        (backup,), primary = world.heads_of("backup"), world.heads_of("role")[0]
        _, _, found = ConditionalGroupTesting(270, 300, seed, k=k, extra_heads=0).complete(world.score)
        _, _, plain = GroupTesting(270, 300, seed, k=k, extra_heads=0).complete(world.score)
        assert primary in found.details["background"] and backup in found.ranking[:k] and backup not in plain.ranking[:k]
        assert found.labels[backup] == "confirmed beside the background, not alone"
        assert backup in found.details["beside_background"] and backup not in found.details["alone"]
        assert -found.coef[backup] == pytest.approx(drop(world, primary, backup) - drop(world, primary), abs=3 * TAU)


def test_a_universal_head_at_the_floor_is_kept_out_of_the_background():
    world = make_interaction_world(5, n_heads=270)
    (universal,) = world.heads_of("universal")
    _, _, found = ConditionalGroupTesting(270, 300, 5, k=len(world.planted), extra_heads=0).complete(world.score)
    assert found.details["kept_out"][0] == universal and universal not in found.details["background"]
    assert found.ranking[0] == universal
    assert found.labels[universal] == "confirmed alone (kept out of the background: the next lead drops no more beside it)"
    assert found.details["background"][0] == world.heads_of("role")[0]  # the largest role: greedy's first


def test_heads_that_overlap_above_the_floor_stay_in_the_background():
    # A and B do part of one job (together 0.35, not 0.55): a background that falls short of its
    # heads' sum is kept unless it sits at the floor, which only U reaches.
    u, a, b, c, d = 7, 40, 90, 150, 222

    def score(masks):
        overlap = 0.3 * masks[:, a] + 0.25 * masks[:, b] - 0.2 * masks[:, a] * masks[:, b]
        return 1.0 - np.minimum(1.0, masks[:, u] + overlap + 0.1 * masks[:, c] + 0.05 * masks[:, d])

    _, _, found = ConditionalGroupTesting(256, 100, 0, k=5, extra_heads=0).complete(score)
    assert found.details["kept_out"] == [u] and found.details["background"][:2] == [a, c]
    assert set(found.details["background"]) == {a, b, c, d} and found.details["conditional"] == "run"
    # b's value is greedy's gain for it: what it adds beside a (0.05), not its drop alone (0.25)
    assert -found.coef[[a, b, c, d]] == pytest.approx([0.3, 0.05, 0.1, 0.05])


def test_nothing_beside_the_background_drops_the_stage_and_the_search_goes_on_alone():
    effect = np.zeros(256)
    effect[10] = 0.5
    _, _, found = ConditionalGroupTesting(256, 100, 0, k=3, extra_heads=0).complete(lambda m: 1.0 - m @ effect)
    assert found.details["conditional"] == "dropped: no group lowers the score beside the background"
    assert found.ranking[0] == 10 and found.details["confirmed"] == 1 < found.details["wanted"] == 3


def test_a_redundant_pair_in_one_group_is_found_from_the_contradiction():
    # Seed 28's partition puts the redundant pair in one group of 16: halving separates the pair and
    # leaves a drop no head holds; each side is then halved with the other ablated.
    world = make_interaction_world(28, n_heads=270, universal=False, backup=None, synergy=None)
    search = ConditionalGroupTesting(270, 200, 28, k=5, group_size=16, extra_heads=0)
    pair = world.heads_of("redundant")
    assert any(set(pair) <= set(group) for group in search.plain.partition())
    masks, _, found = search.complete(world.score)
    assert sorted(found.details["pairs"]) == sorted(pair) and found.details["pair_kinds"] == ["redundant"]
    assert all(found.labels[h] == "pair (redundant): joint drop" for h in pair)
    assert found.coef[list(pair)] == pytest.approx(-drop(world, *pair))
    assert found.ranking[:5].tolist()[-2:] == list(pair) or set(pair) <= set(found.ranking[:5].tolist())


def test_a_backup_in_its_primarys_group_is_a_backup_pair():
    # a alone drops 0.3; b drops 0.3 more, only beside a; both in the first group of 16: halving
    # separates them, b's half keeps an inferred drop no head of it has, and the pair is resolved.
    search = ConditionalGroupTesting(64, 60, 2, k=2, group_size=16, extra_heads=0)
    group = search.plain.partition()[0]
    a, b = group[0], group[-1]

    def score(masks):
        return 1.0 - 0.3 * masks[:, a] - 0.3 * masks[:, a] * masks[:, b]

    _, _, found = search.complete(score)
    assert found.details["pairs"] == [a, b] and found.details["pair_kinds"] == ["backup"]
    assert found.ranking[:2].tolist() == [a, b] and found.labels[b] == "pair (backup): joint drop"
    assert found.coef[[a, b]] == pytest.approx([-0.6, -0.6])  # the pair's joint drop


def test_the_background_holds_at_most_k_minus_1_heads_alone():
    effect = np.zeros(256)
    effect[[5, 60, 130]] = [0.5, 0.3, 0.2]
    _, _, found = ConditionalGroupTesting(256, 100, 0, k=3, background=9, extra_heads=0).complete(lambda m: 1.0 - m @ effect)
    assert found.details["conditional"] == "run" and found.details["background"] == [5, 60, 130]
    assert [found.labels[h] for h in (5, 60, 130)] == ["confirmed alone"] * 2 + [
        "confirmed beside the background, and alone"]


def finish(plan, score):
    """Run a search's generator (masks out, scores in) to its end; its return value."""
    try:
        masks = next(plan)
        while True:
            masks = plan.send(score(masks))
    except StopIteration as done:
        return done.value


def test_locating_a_pair_stops_after_two_masks_where_the_excess_is_spread():
    # Many heads' small effects adding up unevenly (here the score falls with the square of what is
    # ablated) make two sets drop more together than apart with no pair: both halves of the first
    # side then carry part of the excess, and the search stops after those two masks. A real pair's
    # excess lies in one half: one head of each side is found, halving with the other side ablated.
    x, y = tuple(range(16)), tuple(range(16, 32))
    spread = lambda masks: 1.0 - (0.05 * masks[:, :32].sum(axis=1)) ** 2  # noqa: E731
    paired = lambda masks: 1.0 - 0.4 * masks[:, 3] * masks[:, 20]  # noqa: E731
    for score, expected, spent in ((spread, None, 2), (paired, (3, 20), 2 * (4 + 1))):
        probe = Probe(64, 100)
        dx, dy, joint = finish(probe.drops((), [x, y, x + y]), score)
        before = len(probe.memory)
        assert finish(locate_pair(probe, (), (x, dx), (y, dy), joint - dx - dy, {}), score) == expected
        assert len(probe.memory) - before == spent  # 4 levels a side, both halves at the first


def test_a_located_pair_is_kept_only_when_it_drops_more_than_its_heads_alone():
    # Heads 3 and 40 measured as a pair beside no background: kept when together they drop 0.4
    # more than alone, not when their drops just add up.
    additive = lambda masks: 1.0 - 0.2 * masks[:, 3] - 0.1 * masks[:, 40]  # noqa: E731
    paired = lambda masks: additive(masks) - 0.4 * masks[:, 3] * masks[:, 40]  # noqa: E731
    for score, kept in ((additive, []), (paired, [(3, 40)])):
        probe, stage = Probe(64, 20), Stage((), [], Noise(0.01))
        found = Found(stage)
        finish(confirm_pair(probe, stage, found, (3, 40)), score)
        assert [pair.heads for pair in found.pairs] == kept and found.order == [h for pair in kept for h in pair]
        assert len(probe.memory) == 4  # the unablated row, the pair and each head


def test_the_pair_screen_finds_a_redundant_pair_across_groups():
    found_pairs, spent = [], []
    for seed in range(4):
        world = make_interaction_world(seed, n_heads=270)
        pair = set(world.heads_of("redundant"))
        plain = ConditionalGroupTesting(270, 400, seed, k=len(world.planted), extra_heads=0)
        _, _, without = plain.complete(world.score)
        _, _, found = ConditionalGroupTesting(270, 400, seed, k=len(world.planted), pair_screen=True, extra_heads=0).complete(world.score)
        assert not pair <= set(without.ranking[:len(world.planted)].tolist())
        found_pairs.append(set(found.details["pairs"]) == pair)
        assert pair <= set(found.ranking[:len(world.planted)].tolist())
        spent.append(found.n_evals - without.n_evals)
    assert all(found_pairs) and max(spent) <= 200  # 136 unions of 17 groups and their resolution


def test_the_pair_screen_resolves_only_a_union_that_stands_out_of_the_unions_spread():
    # Every two heads interact a little (the score is not additive), so each union of two groups
    # drops somewhat more or less than its groups' sum: no union of those is resolved, and the
    # screen spends the unablated row, the 8 groups and their 28 unions. A pair 0.4 above its
    # heads' sum stands out of that spread and is found. (The heads' noise is set aside: a
    # noiseless oracle, so that the screen's own rule decides.)
    rng = np.random.default_rng(0)
    alone, among = rng.uniform(0.0, 0.01, 64), np.triu(rng.normal(0.0, 0.002, (64, 64)), 1)
    uneven = lambda masks: 1.0 - masks @ alone - np.einsum("ri,ij,rj->r", masks, among, masks)  # noqa: E731
    paired = lambda masks: uneven(masks) - 0.4 * masks[:, 3] * masks[:, 40]  # noqa: E731
    groups = [tuple(range(i, i + 8)) for i in range(0, 64, 8)]
    for score, pairs in ((uneven, []), (paired, [(3, 40)])):
        probe, stage = Probe(64, 200), Stage((), [], Noise(1e-6))
        found = Found(stage)
        finish(screen_pairs(probe, found, stage, groups, 64), score)
        assert [pair.heads for pair in found.pairs] == pairs
        if not pairs:
            assert len(probe.memory) == 1 + 8 + 28


def test_the_pair_screen_measures_a_union_from_the_unions_typical_excess_not_from_zero():
    # Heads that all add up a little more than their sum (every two ablated heads cost 0.001 more):
    # every union of two groups drops 0.064 more than its groups, far above zero but the same for
    # all, so none is a pair; a pair 0.4 above that is found.
    alone = np.random.default_rng(1).uniform(0.0, 0.01, 64)
    together = lambda masks: 1.0 - masks @ alone - 0.0005 * masks.sum(1) ** 2  # noqa: E731
    paired = lambda masks: together(masks) - 0.4 * masks[:, 3] * masks[:, 40]  # noqa: E731
    groups = [tuple(range(i, i + 8)) for i in range(0, 64, 8)]
    for score, pairs in ((together, []), (paired, [(3, 40)])):
        probe, stage = Probe(64, 200), Stage((), [], Noise(1e-6))
        found = Found(stage)
        finish(screen_pairs(probe, found, stage, groups, 64), score)
        assert [pair.heads for pair in found.pairs] == pairs
        if not pairs:
            assert len(probe.memory) == 1 + 8 + 28


def test_the_pair_screen_threshold_stands_above_the_unions_centre_where_their_excess_spreads():
    """Heads whose interactions differ (each two ablated cost 0.001 times their weights' product): the
    unions' excess centres near 0.064 and spreads; none stands 4 spreads above that centre, so none
    is resolved, though the largest stand 4 spreads above zero."""
    rng = np.random.default_rng(2)
    alone, weight = rng.uniform(0.0, 0.01, 64), rng.uniform(0.0, 2.0, 64)
    score = lambda masks: 1.0 - masks @ alone - 0.0005 * (masks @ weight) ** 2  # noqa: E731
    groups = [tuple(range(i, i + 8)) for i in range(0, 64, 8)]
    sums = [weight[list(g)].sum() for g in groups]
    excess = np.array([0.001 * sums[i] * sums[j] for i in range(8) for j in range(i + 1, 8)])
    centre, spread = np.median(excess), 1.4826 * np.median(np.abs(excess - np.median(excess)))
    assert centre > 0.03 and (excess - centre).max() < 4 * spread < excess.max()  # the world is as described
    probe, stage = Probe(64, 200), Stage((), [], Noise(1e-6))
    found = Found(stage)
    finish(screen_pairs(probe, found, stage, groups, 64), score)
    assert found.pairs == [] and len(probe.memory) == 1 + 8 + 28  # the groups and their unions, nothing resolved


def test_a_pair_found_by_the_screen_ranks_above_the_heads_of_less_than_half_its_drop():
    # Heads a, b, w drop 0.5, 0.3 and 0.05 alone; p and q only together, by 0.4. The pair is found
    # after w is confirmed, and ranks after a and b (more than half its drop) but before w.
    a, b, w, p, q = 5, 60, 130, 200, 17

    def score(masks):
        return 1.0 - 0.5 * masks[:, a] - 0.3 * masks[:, b] - 0.05 * masks[:, w] - 0.4 * masks[:, p] * masks[:, q]

    for seed in (1, 2):
        _, _, found = ConditionalGroupTesting(256, 300, seed, k=3, extra_heads=0, pair_screen=True).complete(score)
        assert found.details["pairs"] == [q, p] and found.details["pair_kinds"] == ["redundant"]
        assert found.ranking[:5].tolist() == [a, b, q, p, w]


def test_recall_and_evaluations_against_group_testing_and_greedy():
    rows = compare_interactions(range(3), 270, 400)
    mean = {name: {key: np.mean([row[key] for row in rows if row["search"] == name])
                   for key in ("role", "backup", "redundant", "synergy", "n_evals")}
            for name in ("group_testing", "conditional_group_testing", "conditional_pair_screen", "greedy")}
    assert mean["greedy"]["backup"] == mean["conditional_group_testing"]["backup"] == 1
    assert mean["group_testing"]["backup"] == 0 and mean["greedy"]["redundant"] == 0
    assert mean["conditional_pair_screen"]["redundant"] == 1
    # an AND pair's second head adds nothing beside the first: greedy and this search keep one
    assert mean["greedy"]["synergy"] == mean["conditional_group_testing"]["synergy"] == 0.5
    assert mean["group_testing"]["synergy"] == 1
    assert all(mean[name]["role"] == 1 for name in mean)
    assert mean["conditional_group_testing"]["n_evals"] < 0.07 * mean["greedy"]["n_evals"]
    assert mean["greedy"]["n_evals"] == 271 + sum(270 - r - 1 for r in range(1, 8))
    table = interaction_table(rows)
    line = next(line for line in table.splitlines() if "| conditional_group_testing |" in line)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:7] == ["270", "conditional_group_testing", "1.00", "1.00", "1.00", "0.00", "0.50"]
    assert cells[8] == f"{mean['conditional_group_testing']['n_evals']:.0f}"
    assert cells[9] == f"{mean['conditional_group_testing']['n_evals'] / mean['greedy']['n_evals']:.1%}"


@pytest.mark.parametrize("budget, enough", [(18, False), (30, False), (80, True)])
def test_the_budget_is_never_exceeded_and_a_short_one_says_so(budget, enough):
    world = make_interaction_world(4, n_heads=270)
    search = ConditionalGroupTesting(270, budget, 4, k=5, pair_screen=True, extra_heads=0)
    masks, _, found = search.complete(world.score)
    assert len(masks) == found.n_evals <= budget
    assert found.details["budget"] == budget and found.details["wanted"] == 5
    confirmed = sum(label.startswith(("confirmed", "pair")) for label in found.labels)
    assert found.details["confirmed"] == confirmed and (confirmed >= 5) == enough
    assert set(found.confirmed) == {i for i, label in enumerate(found.labels) if label.startswith(("confirmed", "pair"))}
    names = [f"h{i}" for i in range(270)]
    warnings = found.warnings(names, 5, "conditional_group_testing")
    if enough:
        assert warnings == [] and found.stop == ""
    else:  # its top 5 holds heads it did not confirm: the recovery says so, naming the cap
        assert found.stop == f"at its cap of {budget} evaluations"
        assert len(warnings) == 1 and warnings[0].startswith(f"conditional_group_testing stopped at its cap of {budget}")


def test_a_budget_below_one_partition_is_refused():
    with pytest.raises(ValueError, match="n_masks 17 is too small for group testing over 270 heads in groups of 16: "
                                         "it needs at least 18"):
        ConditionalGroupTesting(270, 17, 0, k=5, extra_heads=0)


def test_a_killed_search_resumes_to_the_uninterrupted_record_and_result():
    # A job reloads its record, replays the search on it once and goes on round by round
    # (steps.sequential): from any cut, the same masks, scores and result as a job never killed.
    world = make_interaction_world(18, n_heads=270)
    search = ConditionalGroupTesting(270, 260, 18, k=9, group_size=16, pair_screen=True, extra_heads=0)
    masks, scores, found = search.complete(world.score)
    assert found.details["pairs"] and found.details["conditional"] == "run"  # every stage ran
    for cut in [0, 1, 17, 18, 40, 77, len(masks) // 2, len(masks) - 1, len(masks)]:
        live, rows = search.resume(masks[:cut], scores[:cut]), [masks[:cut]]
        while live.pending is not None:
            assert not {row.tobytes() for row in live.pending} & {row.tobytes() for row in np.vstack(rows)}
            rows.append(live.pending)
            live.advance(world.score(live.pending))
        assert np.array_equal(np.vstack(rows), masks)
        assert np.array_equal(live.found.ranking, found.ranking) and live.found.labels == found.labels
        assert live.found.details == found.details and np.array_equal(live.found.coef, found.coef)


@pytest.mark.parametrize("options, message", [
    ({"background": -1}, r"background must be an integer >= 0 \(heads confirmed alone first\), got -1"),
    ({"pair_screen": "yes"}, "pair_screen must be true or false, got 'yes'"),
    ({"k": 300}, r"k must lie in 1..270 \(number of heads\), got 300"),
    ({"extra_heads": 1.5}, r"extra_heads must be an integer >= 0"),
])
def test_bad_options_name_the_value_and_what_is_valid(options, message):
    with pytest.raises(ValueError, match=message):
        ConditionalGroupTesting(270, 100, **{"k": 5, "extra_heads": 0, **options})


# ---------------------------------------------------------------- the method


def test_every_option_and_the_budget_change_the_search_id():
    method = get("conditional_group_testing")
    base = SearchParts(tail="n20_s0", seed=0, n_masks=100, sparsity=0.05, options=method.options_of())
    ids = {method.search_id(base)}
    for key, other in {"group_size": 16, "extra_heads": 0, "background": 3, "pair_screen": True}.items():
        ids.add(method.search_id(SearchParts(**{**vars(base), "options": method.options_of({key: other})})))
    ids.add(method.search_id(SearchParts(**{**vars(base), "n_masks": 50})))
    assert len(ids) == 6


def test_the_driver_writes_the_pairs_and_background_by_head_name(tmp_path):
    # The workflow's steps in one process (headloc.locate's path): recovery.json names the heads of
    # the background and of each pair as the rest of the workflow does (L<layer>H<head>).
    world = make_interaction_world(18, n_heads=270)
    geometry = HeadGeometry(30, 9)
    options = {"group_size": 16, "pair_screen": True}
    settings = SearchSettings(n_masks=260, seed=18, top_k=9, sparsity=0.05, alpha=0.001,
                              options={"conditional_group_testing": options})
    found = driver.drive(get("conditional_group_testing"), world.score, geometry, tmp_path, settings)
    names = [head_name(i, 9) for i in range(270)]
    pair = sorted(names[h] for h in world.heads_of("redundant"))
    assert sorted(found["details"]["pairs"]) == pair and found["details"]["pair_kinds"] == ["redundant"]
    assert found["details"]["background"][0] in [names[h] for h in world.heads_of("role")]
    assert found["details"]["kept_out"] == [names[h] for h in world.heads_of("universal")]
    assert found["labels"][names[world.heads_of("backup")[0]]] == "confirmed beside the background, not alone"
    with pytest.raises(ValueError, match="conditional_group_testing.group_size: '16' is not valid; expected an "
                                         "integer >= 1 or auto"):
        SearchSettings(options={"conditional_group_testing": {"group_size": "16"}})


def test_each_option_reaches_the_search_through_the_driver(tmp_path):
    """The method's options, given as its config section, change what the driven search does: the
    heads it wants (top_k + extra_heads), the heads confirmed alone before it searches beside them
    (background) and the unions of groups it screens for pairs with the budget left (pair_screen)."""
    heads = [5, 60, 130, 200, 17]
    effect = np.zeros(256)
    effect[heads] = [0.5, 0.4, 0.3, 0.2, 0.1]
    names = [head_name(h, 8) for h in heads]

    def drive(**options):
        settings = SearchSettings(n_masks=200, top_k=3, options={"conditional_group_testing": options})
        folder = tmp_path / ("_".join(f"{key}{value}" for key, value in options.items()) or "defaults")
        return driver.drive(get("conditional_group_testing"), lambda m: 1.0 - m @ effect, HeadGeometry(32, 8), folder,
                            settings)

    default = drive()
    assert (default["details"]["wanted"], default["details"]["confirmed"]) == (5, 5)  # top_k 3 + extra_heads 2
    assert default["ranking"][:5] == names and default["details"]["background"] == names
    assert [default["labels"][h] for h in names[:2]] == ["confirmed alone", "confirmed beside the background, and alone"]
    fewer = drive(extra_heads=0)
    assert (fewer["details"]["wanted"], fewer["details"]["confirmed"]) == (3, 3) and fewer["ranking"][:3] == names[:3]
    wider = drive(background=2)
    assert [wider["labels"][h] for h in names[:3]] == ["confirmed alone"] * 2 + [
        "confirmed beside the background, and alone"]
    screened = drive(pair_screen=True)
    assert screened["ranking"][:5] == names and screened["n_evals"] > default["n_evals"]


def test_the_benchmark_prints_the_comparison(capsys):
    spec = importlib.util.spec_from_file_location("interaction_search", REPO / "benchmarks/interaction_search.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    benchmark.main(["--seeds", "2", "--sizes", "96", "--budget", "200"])
    out = capsys.readouterr().out
    rows = compare_interactions(range(2), 96, 200)
    assert interaction_table(rows) in out
    quantitative, binary = search_bounds(96, 9)
    assert f"96 heads, 9 planted: information bounds {quantitative:.0f} / {binary:.0f} tests" in out
