"""Every registered search method, run the same way on the same planted tiny model (the way
scikit-learn's ``parametrize_with_checks`` runs every estimator): a new method module is checked
here without a line of this file changing.

The model (tests/planted.py) has one head, PLANTED, that alone carries a copy task; the others are
scaled to noise; its output is scaled down (planted.weakened) so the task is not saturated. Each method is driven through its declaration as the workflow's rules drive it,
by kind: a mask design scored (here by the gold continuation's log-likelihood, computed in this file
with plain forward passes, not by headloc's evaluator) and recovered; greedy rounds scored and
chosen; a gradient search run; or a draw. Then recover_heads' own step turns the files into the
ranking fields. Every method that looks at the model must rank PLANTED first.
"""

import contextlib
import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from planted import N_HEADS, N_LAYERS, PLANTED, planted_examples, planted_model, reference_score, weakened

from headloc import methods
from headloc.methods import driver, kinds
from headloc.methods.settings import SearchSettings
from headloc.heads import HeadGeometry, format_head, head_name
from headloc.model.ablation import ablate_heads, masks_to_gate

NAMES = [head_name(i, N_HEADS) for i in range(N_LAYERS * N_HEADS)]
GEOMETRY = HeadGeometry(N_LAYERS, N_HEADS)
N_MASKS, SPARSITY, TOP_K = 12, 0.25, 2
FAST_OPTIONS = {"chg": {"seeds": 1, "lam": 0.1, "steps": 10},  # a method's options section, kept small
                # the variant that rewards damage (as released, the reward favours the heads the task
                # needs least: test_thompson_as_released_ranks_the_planted_head_low); the loss floor 5
                # nats: ablating PLANTED costs 4.6
                "thompson": {"reward": "damage", "score_range": [-5, 0]}}
BUDGETS = {"thompson": 24}  # Thompson sampling's posterior needs more draws than the 12 masks of a design


@pytest.fixture(scope="module")
def model():
    """The planted head scaled down: it still solves the task, less saturated, so that a first-order
    method (attribution: a gradient at gate = 1) sees it too."""
    return weakened(planted_model(), 0.2)


@pytest.fixture(scope="module")
def examples():
    return planted_examples(12)


def score(model, examples, masks) -> np.ndarray:
    """Each mask's mean gold log-likelihood (1 = ablated): the planted documents all have the same
    length and a one-token continuation, so one unpadded batch per mask (planted.reference_score
    does the same one document at a time; test_scores_agree_with_the_reference checks the two agree)."""
    tokens = torch.tensor([list(e.context) + list(e.target) for e in examples])
    found = []
    for row in np.atleast_2d(masks):
        ablation = ablate_heads(model, masks_to_gate(row, GEOMETRY)) if row.any() else contextlib.nullcontext()
        with torch.no_grad(), ablation:
            logits = model(tokens[:, :-1]).logits[:, -1].double()
        found.append(float(torch.log_softmax(logits, -1).gather(1, tokens[:, -1:]).mean()))
    return np.array(found)


def test_scores_agree_with_the_reference(model, examples):
    masks = np.eye(len(NAMES), dtype=np.int8)[[0, PLANTED[0] * N_HEADS + PLANTED[1]]]
    expected = [reference_score(model, examples, masks_to_gate(row, GEOMETRY)) for row in masks]
    assert score(model, examples, masks) == pytest.approx(expected, abs=1e-5)


def drive(method, model, examples, folder) -> tuple[dict, int]:
    """What rule recover_heads would write for ``method`` (headloc.methods.driver, the workflow's
    steps in one process), and the masks scored making it, counted here."""
    spent = []

    def counted(masks):
        spent.append(len(masks))
        return score(model, examples, masks)

    found = driver.drive(method, counted, GEOMETRY, folder, settings(method), gradient=(model, examples))
    return found, sum(spent)


def settings(method, options=None) -> SearchSettings:
    """The settings every method is driven with here: its budget, the top k, its fast options."""
    options = FAST_OPTIONS.get(method.name, {}) if options is None else options
    return SearchSettings(n_masks=BUDGETS.get(method.name, N_MASKS), seed=0, top_k=TOP_K, sparsity=SPARSITY,
                          alpha=0.001, options={method.name: options} if method.options else {})


@pytest.mark.parametrize("name", methods.names())
def test_every_method_keeps_the_contract(name, model, examples, tmp_path):
    method = methods.get(name)
    found, spent = drive(method, model, examples, tmp_path)
    json.dumps(found)  # recovery.json must be able to hold it
    assert sorted(found["ranking"]) == sorted(NAMES) and sorted(found["coef"]) == sorted(NAMES)
    assert {"n_evals", "alpha", "r2", "intercept"} <= set(found)
    if method.kind.gold:  # its gradients' compute in masked-evaluation equivalents, beside the masks it scored
        assert found["n_evals"] > spent
    else:
        assert found["n_evals"] == spent
    if found["n_evals"]:  # every method that looks at the model (a draw does not)
        assert found["ranking"][0] == format_head(*PLANTED), found["ranking"]
    # what a reader of the top heads must know; and the heads confirmed alone, where a search does
    assert isinstance(found["warnings"], list) and all(isinstance(w, str) for w in found["warnings"])
    assert found["confirmed"] is None or set(found["confirmed"]) <= set(NAMES)


@pytest.mark.parametrize("name", methods.names())
def test_every_method_declares_what_the_workflow_and_report_read(name):
    import matplotlib.markers

    method = methods.get(name)
    assert method.name == name and method.kind in kinds.registry().values() and method.label and method.about
    assert method.marker in matplotlib.markers.MarkerStyle.markers
    parts = methods.SearchParts(tail="n20_s0", seed=0, n_masks=100, sparsity=0.05, top_k=5,
                                options=method.options_of())
    search_id = method.search_id(parts)
    assert search_id.startswith(name + "_") and "/" not in search_id
    # another seed is another search, in another folder
    assert method.search_id(methods.SearchParts(**{**vars(parts), "seed": 1, "tail": "n20_s1"})) != search_id
    if method.repeats:  # a repeat is another search, in another folder
        assert method.search_id(methods.SearchParts(**{**vars(parts), "repeat": 1})) != search_id
    if method.budgeted:  # so is another budget
        assert method.search_id(methods.SearchParts(**{**vars(parts), "n_masks": 50})) != search_id
    assert not method.nested or method.budgeted, "only a budget can nest"
    if method.rows_from:
        assert method.rows_from[0] in methods.names()


def other_values(value, schema: dict) -> list:
    """Values other than ``value`` that the config schema's property ``schema`` allows: another
    member of an enum or constant, two larger integers or numbers, a list with one item changed."""
    for branches in (schema.get("oneOf"), schema.get("anyOf")):
        if branches:
            return [other for branch in branches for other in other_values(value, branch)]
    if "enum" in schema or "const" in schema:
        return [v for v in schema.get("enum", [schema.get("const")]) if v != value]
    kind = schema.get("type")
    if kind == "boolean":
        return [not value]
    if kind == "integer":
        start = value if isinstance(value, int) else schema.get("minimum", 0)
        return [start + 1, start + 2]
    if kind == "number":
        return [value * 2 + 0.5, value * 3 + 1] if isinstance(value, (int, float)) else [1.5, 2.5]
    if kind == "array":
        return [[*value[:i], item, *value[i + 1:]] for i, old in enumerate(value)
                for item in other_values(old, schema["items"])]
    raise AssertionError(f"no other value for a property of {schema}")


def option_variants(method) -> list[tuple[str, dict]]:
    """Every key of a method's options (its config section, as the schema describes it), each
    changed alone to each other value the schema allows: (key, options)."""
    from conftest import REPO
    from headloc.workflow.schema import load_schema

    schema = load_schema(REPO / "config/schema.yaml")["properties"][method.name]["properties"]
    defaults = method.options_of().as_config()
    assert set(schema) == set(defaults), f"{method.name}: its options and the schema's keys differ"
    return [(key, method.options_of({key: other})) for key, value in defaults.items()
            for other in other_values(value, schema[key])]


@pytest.mark.parametrize("name", [name for name in methods.names() if methods.get(name).options])
def test_every_key_of_a_method_s_options_changes_its_search_id(name):
    """A search's folder is named by what changes its result: two searches that differ in one
    option, each written to the folder of the other, would be read as each other. Every option
    set here (the defaults, each key changed alone to two or more other values) names its own."""
    method = methods.get(name)
    parts = methods.SearchParts(tail="n20_s0", seed=0, n_masks=100, sparsity=0.05, top_k=5, options=method.options_of())
    variants = [("defaults", method.options_of()), *option_variants(method)]
    assert {key for key, _ in variants} == {"defaults", *method.options.defaults()}
    named: dict[str, tuple] = {}
    for key, options in variants:
        search_id = method.search_id(methods.SearchParts(**{**vars(parts), "options": options}))
        assert search_id not in named, f"{options} and {named.get(search_id)} share the id {search_id}"
        named[search_id] = (key, options)


@pytest.mark.parametrize("name", methods.names(kind="sequential"))
def test_every_setting_that_changes_a_sequential_search_changes_its_id(name):
    """The search a sequential method builds is what its record holds: settings that build another
    search (budget, seed, top k, sparsity, any option) must name another folder."""
    from headloc.methods.kinds.sequential import SequentialParams

    method = methods.get(name)
    base = {"n_masks": 100, "seed": 0, "top_k": 5, "sparsity": 0.05, "options": method.options_of()}
    changes = [{"n_masks": 50}, {"seed": 1}, {"top_k": 3}, {"sparsity": 0.1},
               *({"options": options} for _, options in option_variants(method))]

    def built(settings):
        params = SequentialParams(name, settings["n_masks"], settings["seed"], settings["top_k"],
                                  settings["sparsity"], settings["options"])
        parts = methods.SearchParts(tail=f"n20_s{settings['seed']}", seed=settings["seed"],
                                    n_masks=settings["n_masks"], sparsity=settings["sparsity"],
                                    top_k=settings["top_k"], options=settings["options"])
        return method.algorithm(270, params), method.search_id(parts)

    search, search_id = built(base)
    for change in changes:
        try:
            other, other_id = built({**base, **change})
        except ValueError:  # settings the search refuses build nothing
            continue
        assert other == search or other_id != search_id, change


@pytest.mark.parametrize("name", methods.names())
def test_a_method_whose_result_depends_on_the_seed_says_so(name, model, examples, tmp_path):
    """Driven with seeds 0 and 1, a method whose ranking or values differ is random (the benchmarks
    then run it once per seed, and the workflow names the seed in its search id)."""
    method = methods.get(name)
    found = [driver.drive(method, lambda masks: score(model, examples, masks), GEOMETRY, tmp_path / str(seed),
                          replace(settings(method), seed=seed), gradient=(model, examples)) for seed in (0, 1)]
    if (found[0]["ranking"], found[0]["coef"]) != (found[1]["ranking"], found[1]["coef"]):
        assert method.random, name


def test_markers_tell_the_methods_apart():
    markers = [methods.get(name).marker for name in methods.names()]
    assert len(set(markers)) == len(markers), markers


def test_an_unknown_method_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown search method 'lasso'; known: .*cs_stratified"):
        methods.get("lasso")


@pytest.mark.parametrize("name", [name for name in methods.names() if methods.get(name).scored])
def test_a_lower_is_better_score_ranks_the_same_heads(name, model, examples, tmp_path):
    """Scored on a loss (the gold continuation's negative log-likelihood: lower is better, as a
    perplexity is) and told so, every scored method (mask designs, greedy's rounds) still ranks
    PLANTED first; told the opposite direction, it ranks PLANTED last among the heads it ranks by
    effect: the direction, not the raw score's sign, decides which heads carry the task."""
    method = methods.get(name)
    planted = format_head(*PLANTED)
    for higher_is_better, folder in ((False, tmp_path / "told"), (True, tmp_path / "wrong")):
        options = FAST_OPTIONS.get(name, {})
        if name == "thompson":  # its range, worst first, in the loss's units as the direction told reads them
            options = {**options, "score_range": [0, 5] if higher_is_better else [5, 0]}
        found = driver.drive(method, lambda masks: -score(model, examples, masks), GEOMETRY, folder,
                             settings(method, options), higher_is_better=higher_is_better,
                             gradient=(model, examples) if method.kind.gold else None)
        if higher_is_better:
            assert found["ranking"][0] != planted and planted not in found["ranking"][:TOP_K], found["ranking"]
        else:
            assert found["ranking"][0] == planted, found["ranking"]
            if name != "thompson":  # its value is a posterior mean reward in [0, 1], not a score change
                assert found["coef"][planted] < 0, "oriented: ablating it makes the task worse"


def test_thompson_as_released_ranks_the_planted_head_low(model, examples, tmp_path):
    """The released code's reward is the score itself (docs/methods.md): a mask that ablates PLANTED
    scores low, so PLANTED earns little, and its posterior mean ranks it below the heads whose
    ablation leaves the score high: out of the top k, where the damage reward puts it first."""
    method = methods.get("thompson")
    found = driver.drive(method, lambda masks: score(model, examples, masks), GEOMETRY, tmp_path,
                         settings(method, {"reward": "score", "score_range": [-5, 0]}))
    assert format_head(*PLANTED) not in found["ranking"][:TOP_K], found["ranking"]
    assert set(found["labels"].values()) == {"posterior mean of the reward (score)"}


def test_a_sequential_search_records_every_mask_it_scored(model, examples, tmp_path):
    """Group testing's record (record.npz beside sequential.json) holds every scored mask once, the
    unablated row first, with the raw scores; driven again on it, nothing is scored again."""
    method, spent = methods.get("group_testing"), []

    def counted(masks):
        spent.append(len(masks))
        return score(model, examples, masks)

    first = driver.drive(method, counted, GEOMETRY, tmp_path, settings(method, {}))
    with np.load(tmp_path / "record.npz") as record:
        masks, raw = record["masks"], record["scores"]
    assert not masks[0].any() and len(masks) == first["n_evals"] == sum(spent)
    assert len({row.tobytes() for row in masks}) == len(masks)
    assert raw == pytest.approx(score(model, examples, masks))
    again = driver.drive(method, counted, GEOMETRY, tmp_path, settings(method, {}))
    assert sum(spent) == first["n_evals"] and again == first
