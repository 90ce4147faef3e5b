"""Screened greedy (headloc.search.screened) through the registered method, on worlds whose every
set's score is known, with a first-order estimate that sees a head's effect only where its gate
moves it (none for a head at the floor's cliff, none for a redundant head beside its partner)."""

from __future__ import annotations

import numpy as np
import pytest

from headloc import methods
from headloc.methods.kinds.guided import GuidedParams, guided_fields, measured_sets

N = 64
FLOOR = -1.0  # the score's floor (chance)


class World:
    """1 - the ablated heads' effects, floored at FLOOR; ``cliff``: heads that alone take the score to
    the floor (where the small heads still move it a little); ``backup``: {(primary, head): drop of head once primary is ablated}; ``redundant``:
    (a, b, drop) that only the two ablated together cause. ``estimate`` is first order: a cliff
    head's gradient is 0 (flat until it falls), a backup head's shows beside its primary, a redundant
    head's where its partner is ablated, or, its own gate at 0, where both are."""

    def __init__(self, effect, cliff=(), backup=None, redundant=None, at_floor=None):
        self.effect, self.cliff, self.backup, self.redundant = np.asarray(effect, float), set(cliff), backup or {}, redundant
        self.at_floor = at_floor or {}  # head: its drop beside a cliff head (0 elsewhere)
        self.scored: list[frozenset] = []
        self.estimated: list[frozenset] = []  # the backgrounds of the gradients taken

    def drop(self, heads: set) -> float:
        total = self.effect[list(heads)].sum() + sum(d for (p, h), d in self.backup.items() if {p, h} <= heads)
        if self.redundant and {self.redundant[0], self.redundant[1]} <= heads:
            total += self.redundant[2]
        return total

    def score_sets(self, head_sets):
        self.scored += [frozenset(s) for s in head_sets]
        return [self.floor(set(s)) if self.cliff & set(s) else max(FLOOR, 1.0 - self.drop(set(s))) for s in head_sets]

    def floor(self, heads: set) -> float:
        """At the floor the many small heads still move the score a little (as on the planted models)."""
        return FLOOR - sum(self.effect[h] for h in heads if abs(self.effect[h]) < 0.05) - sum(
            self.at_floor.get(h, 0.0) for h in heads)

    def estimate(self, background):
        background = set(background)
        self.estimated.append(frozenset(background))
        guess = self.effect.copy()
        guess[list(self.cliff)] = 0.0
        for head, drop in self.at_floor.items():
            guess[head] += drop if self.cliff & background else 0.0
        for (primary, head), d in self.backup.items():
            guess[head] += d if primary in background else 0.0
        if self.redundant:
            a, b, d = self.redundant
            for head, partner in ((a, b), (b, a)):
                guess[head] += d if partner in background else 0.0
        return guess


def search(world: World, k: int, seed: int = 0, estimate=None, **options):
    """The registered method's algorithm, as the guided kind calls it (options as a config gives
    them); ``estimate``: one that reads the world differently (the world's own by default)."""
    method = methods.get("screened_greedy")
    params = GuidedParams(method.name, k, method.options_of(options), seed=seed)
    return method.algorithm(estimate or world.estimate, world.score_sets, N, params)


def effects(**heads) -> np.ndarray:
    effect = np.random.default_rng(1).normal(0, 0.005, N)
    for head, value in heads.items():
        effect[int(head[1:])] = value
    return effect


def test_a_head_at_the_floor_is_set_aside_and_the_rest_are_chosen_beside_each_other():
    """Head 9 takes the score to its floor and its gradient is 0 (guided greedy never lists it);
    beside it nothing moves, so it is reported first and never ablated while the others are found."""
    world = World(effects(h5=0.6, h40=0.3), cliff=[9])
    found = search(world, 3, m=3, m_abs=0)
    assert found.heads == [9, 5, 40]
    assert found.details["set_aside"] == [9]
    assert found.labels[0].startswith("alone: at the score's floor")
    assert not any(9 in s and len(s) > 1 for s in world.scored[found.evaluations:])  # never beside others after the screen
    assert found.drops[1:] == pytest.approx([0.6, 0.3], abs=0.02)


def test_a_head_whose_partner_hurts_only_beside_it_is_not_set_aside():
    """Head 9 alone drops the score most, and the screen's other head (30) adds nothing beside it,
    so the one-mask check says 9 sits at the floor; but head 22 hurts only beside 9 (as antonyms'
    L0H7 beside L0H4 on SmolLM2), third by its estimate there after two heads whose estimates
    promise what their ablation does not give. The step that checks the floor (its 3 heads) finds
    22: 9 starts the background and 22 is chosen beside it; beside both nothing else moves."""
    world = World(effects(h9=1.2, h30=0.3), backup={(9, 30): -0.3, (9, 22): 0.5})

    def estimate(background):  # 50 and 51 promise more than 22 beside 9, and do nothing
        guess = world.estimate(background)
        guess[[50, 51]] += 0.9 if 9 in background else 0.0
        return guess

    method = methods.get("screened_greedy")
    run = lambda **options: method.algorithm(estimate, world.score_sets, N, GuidedParams(  # noqa: E731
        method.name, 3, method.options_of({"m": 3, "m_abs": 0, **options})))
    found = run()
    assert found.heads == [9, 22] and found.details["set_aside"] == []
    assert found.labels[0].startswith("chosen 1, alone (the screen); not at the floor")
    assert found.drops[1] == pytest.approx(0.5 + world.effect[22], abs=1e-9)
    assert run(floor_check=2).details["set_aside"] == [9]  # 22 was third on the check's list
    world.estimated.clear()
    unchecked = run(floor_check=0)
    assert unchecked.details["set_aside"] == [9] and 22 not in unchecked.heads  # what the check is for
    assert frozenset({9}) not in world.estimated  # no gradient is taken beside it either


def test_the_head_that_alone_hurts_most_is_found_though_its_gradient_says_nothing():
    """Head 17 alone drops the score most, its estimate is 0: the screen confirms it alone and it
    starts the background (greedy's first head), found without a gradient."""
    world = World(effects(h17=0.7, h3=0.3, h30=0.2))
    blind = lambda bg: np.where(np.arange(N) == 17, 0.0, world.estimate(bg))  # noqa: E731
    method = methods.get("screened_greedy")
    found = method.algorithm(blind, world.score_sets, N, GuidedParams(method.name, 3, method.options_of({"m": 3,
                                                                                                       "m_abs": 0})))
    assert found.heads == [17, 3, 30]
    assert found.labels[0] == "chosen 1, alone (the screen)"


def test_a_backup_head_is_chosen_beside_its_primary():
    world = World(effects(h4=0.6, h11=0.3), backup={(4, 22): 0.4})
    found = search(world, 3, m=3, m_abs=0)
    assert found.heads == [4, 22, 11]
    assert found.drops[1] == pytest.approx(0.4 + world.effect[22], abs=1e-9)


def test_both_heads_of_a_synergy_pair_are_set_aside_with_the_universal_head():
    """Each head of a synergy pair alone breaks the task: three heads at the floor, all found."""
    world = World(effects(), cliff=[2, 33, 50])
    found = search(world, 3)
    assert sorted(found.heads) == [2, 33, 50] and sorted(found.details["set_aside"]) == [2, 33, 50]
    assert found.gradient_passes == 0  # no step was needed: the ranking's tail is the screen's order
    ranking = guided_fields(found, 0.0, [f"L{h // 8}H{h % 8}" for h in range(N)])["ranking"]
    assert len(set(ranking)) == N


@pytest.mark.parametrize("seed", range(4))
def test_beside_a_universal_head_alone_a_redundant_pair_is_still_found(seed):
    """The planted redundant task: a head at the floor and a pair, nothing else matters alone. The
    screen's other heads do not lower the score, so the floor is told by the span; the head is set
    aside, not ablated beside the probe (beside it, at the floor, the pair could not show)."""
    world = World(effects(), cliff=[9], redundant=(20, 45, 0.6))
    found = search(world, 3, seed=seed)
    assert found.heads[0] == 9 and sorted(found.heads[1:]) == [20, 45] and found.details["set_aside"] == [9]


def test_a_head_that_moves_the_floor_a_little_leaves_the_universal_head_set_aside():
    """At the planted models' floor small heads still move the score: here head 33, by 0.2 beside
    the universal head 9 (more than 5 % of the span, far less than 9's own drop of 2): 9 stays set
    aside, so the redundant pair can still show (i270-s3's redundant task: L8H8 beside L1H14)."""
    world = World(effects(), cliff=[9], redundant=(20, 45, 0.6), at_floor={33: 0.2})
    found = search(world, 3, m=3, m_abs=0)
    assert found.details["set_aside"] == [9] and sorted(found.heads[1:]) == [20, 45]
    assert 33 in found.lists[0] and found.picked[0] is None  # measured beside 9 by the check, not taken


@pytest.mark.parametrize("seed", range(6))
def test_a_redundant_pair_is_found_by_the_probe_whatever_the_halves(seed):
    """Heads 20 and 45 matter only together; the halves split them or hold both, by the seed."""
    world = World(effects(h5=0.5), cliff=[9], redundant=(20, 45, 0.6))
    found = search(world, 4, seed=seed, m=3, m_abs=0)
    assert found.heads[:2] == [9, 5] and sorted(found.heads[2:]) == [20, 45]
    assert sorted(found.details["pair"]) == [20, 45]
    assert found.drops[2:] == pytest.approx([world.drop({20, 45, 5}) - world.drop({5})] * 2)
    sets = measured_sets(found)
    assert sets[20] == ([5, 20, 45], [5]) and sets[45] == ([5, 45, 20], [5])


def test_it_stops_when_nothing_more_lowers_the_score_and_finds_no_more_heads():
    """One head matters, nothing else moves: after it, a step and the pair probe find nothing, so
    the search finds one head of the five asked; the steps that fill the top 5 below the noise are
    ranked after it and not confirmed."""
    effect = np.zeros(N)
    effect[5] = 0.6
    world = World(effect)
    found = search(world, 5, m=3, m_abs=0)
    assert found.heads == [5] and found.details["pair"] == [] and found.picked[-1] is None
    assert len(found.details["below_noise"]) == 4 and 5 not in found.details["below_noise"]
    names = [f"L{h // 8}H{h % 8}" for h in range(N)]
    fields = guided_fields(found, 0.0, names)
    assert fields["confirmed"] == ["L0H5"] and len(fields["ranking"]) == N
    assert fields["ranking"][1:5] == [names[h] for h in found.details["below_noise"]]
    assert all(fields["labels"][names[h]].startswith("below the noise") for h in found.details["below_noise"])


def test_after_a_stop_greedys_steps_fill_the_top_k_below_the_noise():
    """Heads 5 and 40 matter; beside them 12, 7 and 30 each lower the score by less than 5 % of the
    span, so the search finds two heads. Once 12 is ablated, 7 raises the score (the runners-up of
    one step can restore it beside each other: SmolLM2's language, seed 1). The stopped step's
    runners-up (12, 7, 30) would cost the top 5 that; steps that go on beside the heads found take
    12, then 30 beside 12 (7 now raises the score), each the largest drop measured in its step."""
    world = World(effects(h5=0.6, h40=0.3, h12=0.025, h7=0.02, h30=0.015), backup={(12, 7): -0.1})
    found = search(world, 5, m=3, m_abs=0, screen=2, pair_candidates=0)  # no probe: 12 and 30 as a pair
    below = found.details["below_noise"]
    assert found.heads == [5, 40] and below[:2] == [12, 30] and len(below) == 3
    for head in below:  # each the best of the step beside the heads found and the fills before it
        step = next(i for i, b in enumerate(found.backgrounds) if set(b) == {5, 40, *below[:below.index(head)]})
        assert found.measured[step][head] == max(found.measured[step].values())
    assert len({frozenset(b) for b in found.backgrounds}) == len(found.backgrounds)  # no step taken twice
    ranking = guided_fields(found, 0.0, list(range(N)))["ranking"]
    assert ranking[:5] == [5, 40, *below] and 7 not in ranking[:5]
    filled, runners_up, chosen = world.score_sets([ranking[:5], [5, 40, 12, 7, 30], [5, 40]])
    assert filled < chosen < runners_up  # below the noise, but damage; the runners-up give back


def test_asked_for_every_head_a_search_that_stops_fills_the_rest_each_head_once():
    effect = np.zeros(N)
    effect[5] = 0.6
    found = search(World(effect), N, m=3, m_abs=0, pair_candidates=0)
    below = found.details["below_noise"]
    assert found.heads == [5] and sorted(below) == [h for h in range(N) if h != 5]


def test_a_search_that_chose_k_heads_ranks_the_rest_by_their_drop_wherever_measured():
    """With k = 3 the same world (and head 7) ends at 7, chosen beside 5 and 40, with no step left
    unanswered: after its three heads comes 12, the largest drop of a head not chosen (beside 5),
    before the heads the last step measured beside 5 and 40. A filtered top k (universal heads left
    out) draws on this order, where the heads measured beside every chosen one mean less."""
    world = World(effects(h5=0.6, h40=0.3, h12=0.25, h7=0.15), backup={(40, 12): -0.5})
    found = search(world, 3, m=3, m_abs=0, screen=2, probe_leads=0)  # the probe's leads would list 12 again
    assert found.heads == [5, 40, 7] and found.picked[-1] == 7 and 12 not in found.lists[-1]
    assert guided_fields(found, 0.0, list(range(N)))["ranking"][3] == 12


def test_recovery_fields_name_the_set_aside_heads_and_value_each_chosen_head_by_its_drop():
    world = World(effects(h5=0.6), cliff=[9], redundant=(20, 45, 0.6))
    found = search(world, 4, m=3, m_abs=0)
    names = [f"L{h // 8}H{h % 8}" for h in range(N)]
    fields = guided_fields(found, 3.0, names)
    assert fields["details"]["set_aside"] == ["L1H1"] and sorted(fields["details"]["pair"]) == ["L2H4", "L5H5"]
    assert fields["ranking"][:2] == ["L1H1", "L0H5"]
    assert fields["coef"]["L1H1"] == pytest.approx(-2.0, abs=0.05)  # 1 - (-1): alone to the floor
    assert fields["n_evals"] == found.evaluations + 3


@pytest.mark.parametrize("options, message", [
    ({"m": 0, "m_abs": 0}, "both 0"),
    ({"pair_candidates": 1}, "pair_candidates: 1 is not valid"),
    ({"screen": 0}, "screen: 0 is not valid"),
    ({"floor_check": -1}, "floor_check: -1 is not valid"),
    ({"deepen": -1}, "deepen: -1 is not valid"),
    ({"probe_leads": -1}, "probe_leads: -1 is not valid"),
    ({"probe_leads": 1.5}, "probe_leads: 1.5 is not valid"),
])
def test_options_that_cannot_work_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        methods.get("screened_greedy").options_of(options)


def test_the_screens_seed_changes_the_partition_not_the_heads():
    world = World(effects(h5=0.6, h40=0.3), cliff=[9])
    first, other = search(world, 3, seed=0, m=3, m_abs=0), search(World(world.effect, cliff=[9]), 3, seed=7, m=3, m_abs=0)
    assert first.heads == other.heads == [9, 5, 40]


def test_the_probe_takes_its_candidates_beside_the_background_too():
    """Heads 20 and 45 matter only together; their gradients are large beside nothing and nil
    beside either half (as a planted redundant pair's were), where four other heads have larger
    ones: only the estimates beside the background put the pair among the four candidates."""
    world = World(effects(), cliff=[9], redundant=(20, 45, 0.6))

    def estimate(background):
        guess = np.zeros(N)
        if background:  # a half: two strong and two weak decoys, the pair unseen
            guess[[1, 2]], guess[[3, 4]] = 0.9, 0.05
        else:
            guess[[20, 45]] = 0.5
        return guess
    method = methods.get("screened_greedy")
    found = method.algorithm(estimate, world.score_sets, N, GuidedParams(method.name, 3, method.options_of({})))
    assert sorted(found.details["pair"]) == [20, 45]


@pytest.mark.parametrize("screen", [1, 2])
def test_the_screen_confirms_as_many_heads_as_asked(screen):
    world = World(effects(h5=0.6, h40=0.3, h12=0.2), cliff=[9])
    assert len(search(world, 5, screen=screen, m=3, m_abs=0).details["screened"]) == screen


def test_a_redundant_pair_is_found_right_after_the_first_head_though_every_step_finds_a_head():
    """Heads 20 and 45 together cost more than any two steps beside head 5, and each step still
    finds a small head, so a probe run only where a step finds nothing would never see them (as on
    SmolLM2's plural: L2H0 with L1H3 12.95 nats, each alone less than 0.35). Weighed against the
    two steps beside 5, the pair joins and the steps' heads are displaced, then found again."""
    world = World(effects(h5=0.6, h40=0.15, h12=0.1, h7=0.08), redundant=(20, 45, 0.8))
    found = search(world, 5, m=3, m_abs=0)
    assert found.heads[:3] in ([5, 20, 45], [5, 45, 20]) and sorted(found.details["pair"]) == [20, 45]
    assert found.details["displaced"] == [40, 12] and found.heads[3:] == [40, 12]
    assert found.picked[:2] == [None, None] and found.backgrounds[:2] == [[5], [5, 40]]  # the displaced steps
    assert found.drops[1] == pytest.approx(0.8 + world.effect[[20, 45]].sum(), abs=1e-9)
    assert found.labels[1:3] == ["pair, beside 1 heads"] * 2 and len(found.labels) == 5
    assert found.beside[1:3] == [[5], [5]] and found.beside[3:] == [[5, *found.heads[1:3]], [5, *found.heads[1:4]]]
    assert len({tuple(b) for b in found.backgrounds}) == len(found.backgrounds)  # no step taken twice
    # gradients beside 5 (the probe's and the first step's), the two halves, 5 and 40 (the displaced
    # second step), then the two steps beside the pair: one probe, not one a step
    assert found.gradient_passes == 6


def test_no_pair_is_taken_where_it_would_pass_k():
    world = World(effects(h5=0.6, h40=0.15), redundant=(20, 45, 0.8))
    assert search(world, 2, m=3, m_abs=0).heads == [5, 40]


def test_two_steps_that_lower_the_score_more_than_the_pair_keep_their_heads_and_the_pair_comes_later():
    """Beside head 5 the pair (20, 45) costs 0.6, more than the first step's head (40: 0.5) but less
    than two steps' (40 and 12: 0.9): the steps' heads stay; when the steps find nothing more, the
    probe beside the three heads finds the pair."""
    world = World(effects(h5=0.9, h40=0.5, h12=0.4), redundant=(20, 45, 0.6))
    found = search(world, 5, m=3, m_abs=0)
    assert found.heads[:3] == [5, 40, 12] and sorted(found.heads[3:]) == [20, 45]
    assert found.details["displaced"] == [] and [len(b) for b in found.beside[3:]] == [3, 3]


def test_a_pair_that_costs_less_than_the_first_steps_head_is_not_taken():
    """Where the first step's head alone lowers the score more than the best pair, the pair is not
    taken and the steps go on from that head."""
    world = World(effects(h5=0.9, h40=0.7, h12=0.1), redundant=(20, 45, 0.3))
    found = search(world, 3, m=3, m_abs=0)
    assert found.heads == [5, 40, 12] and found.details["pair"] == [] and found.details["displaced"] == []
    assert [len(b) for b in found.backgrounds] == [1, 2]


def test_the_probe_after_a_stop_runs_once():
    """With room for seven heads the steps stop twice (beside 5, 40 and 12, then beside the pair as
    well); the probe runs after the first stop only. Gradients: beside 5 (the first probe's and
    step's), its two halves, beside 5 and 40, beside the three, the late probe's two halves, beside
    all five: 8; then the top 7 is filled below the noise: the stopped step's best, and a step beside
    the six: 9."""
    world = World(effects(h5=0.9, h40=0.5, h12=0.4), redundant=(20, 45, 0.6))
    found = search(world, 7, m=3, m_abs=0)
    assert found.heads[:3] == [5, 40, 12] and sorted(found.heads[3:]) == [20, 45]
    assert len(found.probes) == 2 and len(found.details["below_noise"]) == 2 and found.gradient_passes == 9


def test_each_probe_is_recorded_with_what_it_was_weighed_against():
    """Beside head 5 the best pair is the two steps' heads (40: 0.5, 12: 0.4; the redundant pair
    20, 45 costs 0.6): the record says so and that the pair did not join there, no better than the
    steps; the late probe, beside the three heads, weighs no steps and takes the redundant pair.
    recovery.json names the heads."""
    world = World(effects(h5=0.9, h40=0.5, h12=0.4), redundant=(20, 45, 0.6))
    found = search(world, 5, m=3, m_abs=0)
    early, late = found.probes
    pair = 0.6 + world.effect[[20, 45]].sum()
    assert early["beside"] == [5] and sorted(early["pair"]) == [12, 40] and early["joined"] is False
    assert early["drop"] == pytest.approx(0.9) and early["steps_drop"] == pytest.approx(0.9)
    assert late["beside"] == [5, 40, 12] and sorted(late["pair"]) == [20, 45] and late["joined"] is True
    three, five = world.score_sets([[5, 40, 12], [5, 40, 12, 20, 45]])  # beside three heads, at the floor
    assert late["steps_drop"] is None and late["drop"] == pytest.approx(three - five) and three - five < pair
    names = [f"L{h // 8}H{h % 8}" for h in range(N)]
    probes = guided_fields(found, 3.0, names)["details"]["probes"]
    assert probes[1]["beside"] == ["L0H5", "L5H0", "L1H4"] and sorted(probes[1]["pair"]) == ["L2H4", "L5H5"]
    assert [probe["joined"] for probe in probes] == [False, True]


def test_a_pair_that_displaces_the_steps_is_recorded_as_joined():
    world = World(effects(h5=0.6, h40=0.15, h12=0.1, h7=0.08), redundant=(20, 45, 0.8))
    (probe,) = search(world, 5, m=3, m_abs=0).probes
    assert probe["joined"] is True and probe["steps_drop"] == pytest.approx(0.25)
    assert probe["drop"] == pytest.approx(0.8 + world.effect[[20, 45]].sum())


@pytest.mark.parametrize("seed", range(4))
def test_a_head_that_shows_only_beside_much_damage_is_listed_by_the_probes_halves(seed):
    """Head 22 costs 0.5 once head 5 is ablated, but its gradient shows only beside many other
    ablated heads: beside the probe's half that does not hold it (as L1H0's on SmolLM2's
    comparative: 89th beside greedy's two heads, 2nd beside one of the probe's halves). Heads 50-53
    raise the score and have the largest estimates of either sign, so 22 is none of the probe's pair
    candidates; that half's leads list it (not the chosen 5), and the step beside 5 chooses it.
    Without leads no step lists it."""
    world = World(effects(h5=0.9, h40=0.3, h12=0.2, h50=-0.4, h51=-0.35, h52=-0.45, h53=-0.5),
                  backup={(5, 22): 0.5})

    def estimate(background):
        guess = world.estimate(background)
        guess[22] = 0.3 if len(background) >= N // 4 and 22 not in background else 0.0
        return guess

    method = methods.get("screened_greedy")

    def found_with(**options):
        params = GuidedParams(method.name, 3, method.options_of({"m": 3, "m_abs": 0, **options}), seed=seed)
        return method.algorithm(estimate, world.score_sets, N, params)

    found = found_with()  # probe_leads: 2, the default
    assert found.heads == [5, 22, 40] and found.drops[1] == pytest.approx(0.5 + world.effect[22])
    (probe,) = found.probes
    assert 22 in probe["leads"] and 5 not in probe["leads"] and 22 not in probe["pair"]
    names = [f"L{h // 8}H{h % 8}" for h in range(N)]
    assert "L2H6" in guided_fields(found, 3.0, names)["details"]["probes"][0]["leads"]
    without = found_with(probe_leads=0)
    assert without.heads == [5, 40, 12] and without.probes[0]["leads"] == []


def hidden_backup(drop: float, seed: int, **options):
    """Head 22 costs ``drop`` once head 40 is ablated, but its gradient shows only beside half the
    heads ablated with 40; the heads 50-53 raise the score and are the probes' pair candidates (no
    pair joins). Heads 5 and 40 are found first. Head 12 costs 0.1 alone, 0.03 beside 40, and its
    gradient is 0: a step lists it only where the screen confirmed it. The world and the search."""
    world = World(effects(h5=0.9, h40=0.5, h50=-0.4, h51=-0.35, h52=-0.45, h53=-0.5, h12=0.1),
                  backup={(40, 22): drop, (40, 12): -0.07})

    def estimate(background):
        guess = world.estimate(background)
        guess[22] = 0.3 if len(background) >= N // 4 and 40 in background and 22 not in background else 0.0
        guess[12] = 0.0
        return guess

    return world, search(world, 5, seed, estimate, m=3, m_abs=0, **options)


@pytest.mark.parametrize("seed", [4, 6, 11])  # seeds whose first probe's halves do not lead to head 22
def test_a_head_the_probe_after_a_stop_leads_to_is_measured_and_found(seed):
    """Beside 5 and 40 the step does not list head 22 and finds nothing. The probe after that stop
    leads to it; the step is taken again with 22 on its list, measuring only the heads it did not
    list before, and 22 is found (no later step would list it: the search stopped there)."""
    world, found = hidden_backup(0.3, seed)
    early, late = found.probes
    assert 22 not in early["leads"] and 22 in late["leads"] and late["joined"] is False
    stopped, again = [i for i, b in enumerate(found.backgrounds) if b == [5, 40]]
    assert found.picked[stopped] is None and 22 not in found.lists[stopped] and found.picked[again] == 22
    assert found.heads[:3] == [5, 40, 22] and found.drops[2] == pytest.approx(0.3 + world.effect[22])
    beside = [s for s in world.scored if len(s) == 3 and {5, 40} < s]
    assert len(beside) == len(set(beside))  # the step again measured only the heads new on its list


def test_a_head_the_probe_after_a_stop_leads_to_below_the_noise_fills_the_top_k_not_found():
    """As above, but head 22 costs 0.02 beside 40, under 5 % of the span: the step again does not
    choose it. The steps below the noise start from that step: 12, which the screen confirmed
    (0.03), then 22 beside it."""
    _, found = hidden_backup(0.02, 6)
    assert 12 in found.details["screened"] and found.heads == [5, 40] and 22 in found.probes[-1]["leads"]
    assert found.details["below_noise"][:2] == [12, 22] and found.backgrounds.count([5, 40]) == 2


def test_the_step_is_not_taken_again_where_it_listed_the_probes_leads():
    """With seed 0 the first probe's halves lead to 22, so the step beside 5 and 40 lists it and
    chooses it; the step after it finds nothing and the probe's leads are on its list (23 on no
    earlier one) or already chosen: no step is taken twice beside the same heads."""
    _, found = hidden_backup(0.3, 0, probe_leads=3)
    assert 22 in found.probes[0]["leads"] and found.heads[:3] == [5, 40, 22]
    assert len(found.probes) == 2 and found.probes[1]["beside"] == [5, 40, 22] and 23 in found.probes[1]["leads"]
    assert len({frozenset(b) for b in found.backgrounds}) == len(found.backgrounds)


def misleading(deepen: int, near: float = -0.1):
    """Beside head 5 the estimate misleads: heads 50-55 have the largest estimated drops (0.6) and
    each raises the score (by 0.1; head 50 by ``-near``), as on SmolLM2's continent beside three
    heads. Head 40 costs 0.5 (the screen confirms it: it is on every list), head 22 costs 0.6
    beside 5 (a backup head) and its estimate ranks it 8th (0.05). The search: k = 2, lists of 3,
    no estimate of either sign."""
    world = World(effects(h5=0.9, h40=0.5, h50=near, **{f"h{h}": -0.1 for h in range(51, 56)}),
                  backup={(5, 22): 0.6})

    def estimate(background):
        guess = world.estimate(background)
        guess[50:56], guess[22] = 0.6, 0.05
        return guess

    return search(world, 2, estimate=estimate, m=3, m_abs=0, deepen=deepen)


@pytest.mark.parametrize("deepen, near", [(3, -0.1), (2, -0.1), (3, 0.0)])
def test_where_the_estimates_first_heads_all_raise_the_score_the_step_measures_further_down(deepen, near):
    """The step beside 5 measures 50-52 (and the screen's 40), which raise the score (or, head 50,
    change nothing), then 53-55, which raise it too, then 22 and the head after it (40, 7th, is
    measured already): 22 is chosen (two batches further down are enough). With one batch fewer
    22 is never measured and 40 is chosen."""
    found = misleading(deepen, near)
    (measured,) = found.measured
    assert found.heads == [5, 22] and found.drops[1] == measured[22] > measured[40]
    assert found.lists[0][:7] == [50, 51, 52, 40, 53, 54, 55] and found.lists[0][7] == 22
    assert len(found.lists[0]) == 9 and all(measured[h] <= 0 for h in range(50, 56))
    for deepen in (1, 0):
        fewer = misleading(deepen)
        assert fewer.heads == [5, 40] and all(22 not in step for step in fewer.measured)


def test_a_step_goes_no_further_down_where_one_of_its_first_heads_lowers_the_score():
    """Head 50 lowers the score (by 0.01, under the noise): the estimate's first three heads do not
    all raise it, so the step stops at them (and 40) and 22 is never measured."""
    found = misleading(3, near=0.01)
    assert found.heads == [5, 40] and found.lists[0] == [50, 51, 52, 40]


def test_lists_of_estimates_of_either_sign_alone_go_no_further_down():
    """With m = 0 there is no order of estimated drops to go down: the step measures its m_abs
    heads (40, and 50 and 51, which raise the score) and no more."""
    world = World(effects(h5=0.9, h40=0.5, h50=-0.1, h51=-0.1, h52=-0.1))
    found = search(world, 2, m=0, m_abs=3)
    assert found.heads == [5, 40] and found.lists[0] == [40, 50, 51]


def test_the_floor_check_measures_only_its_heads_though_they_all_raise_the_score():
    """Beside head 9 (at the floor) heads 5 and 50-52 have the largest estimates and change nothing:
    the check measures three of them and goes no further down (it asks whether a partner hurts
    beside the head, not what hurts most), and 9 is set aside."""
    world = World(effects(h5=0.6, h40=0.3, h50=-0.1, h51=-0.1, h52=-0.1), cliff=[9])

    def estimate(background):
        guess = world.estimate(background)
        guess[50:53] = 0.6
        return guess

    found = search(world, 3, estimate=estimate, m=3, m_abs=0)
    assert found.details["set_aside"] == [9] and found.backgrounds[0] == [9] and len(found.lists[0]) == 3
    assert all(found.measured[0][h] <= 0 for h in found.lists[0])


def test_every_step_after_a_probe_lists_the_leads_of_every_probe_before_it():
    """The probe's leads stay on the lists: head 63's gradient is large beside the early probe's
    halves only (its ablation changes nothing), and after the late probe the steps still measure
    it, beside each step's heads."""
    world = World(effects(h5=0.9, h40=0.5, h12=0.4), redundant=(20, 45, 0.6))

    def estimate(background):
        guess = world.estimate(background)
        guess[63] = 0.8 if len(background) >= N // 4 and 40 not in background else 0.0
        return guess

    method = methods.get("screened_greedy")
    found = method.algorithm(estimate, world.score_sets, N, GuidedParams(method.name, 7, method.options_of(
        {"m": 3, "m_abs": 0})))
    early, late = found.probes
    assert 63 in early["leads"] and 63 not in late["leads"] and 63 not in found.heads
    after_late = [i for i, background in enumerate(found.backgrounds) if set(late["beside"]) < set(background)]
    assert after_late  # a step ran beside the pair the late probe found
    assert all(63 in found.lists[i] for i in after_late)
