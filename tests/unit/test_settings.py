"""Typed settings (headloc.methods.settings): the config schema (the file's ``search`` section, and
each method's options section built from its class) and the dataclasses hold the same keys,
types, rules and defaults, and every entry point (the workflow, locate, the CLI, the driver)
takes its defaults from the one settings object."""

import inspect

import pytest
import yaml
from jsonschema import Draft202012Validator

from conftest import REPO, accuracy_demo
from headloc import methods
from headloc.methods.settings import SearchSettings
from headloc.workflow.schema import load_schema, validate_config, with_methods
from headloc.workflow.configured import task_settings

SCHEMA = load_schema(REPO / "config/schema.yaml")
WITH_OPTIONS = [name for name in methods.names() if methods.get(name).options]
# values of every shape a config may hold: each key takes some and refuses the others
PROBES = [-1, 0, 1, 2, 3, 5, 100, 0.5, 1.5, 2.5, "auto", "cv", "score", "damage", "16", True, False, None, [0, 1],
          [-5, 0], [1, "a"], [0, 1, 2], [], [5, 50], [5, 5], [4], ["cs_stratified"], ["cs_stratified", "greedy"],
          ["nope"], ["greedy", "greedy"]]


def resolved(node: dict) -> dict:
    ref = node.get("$ref")
    return node if ref is None else {**resolved(SCHEMA["$defs"][ref.removeprefix("#/$defs/")]),
                                     **{k: v for k, v in node.items() if k != "$ref"}}


def schema_keys(section: str) -> dict:
    """section -> {key: its resolved schema}; the search settings add validation.top_k."""
    found = {key: resolved(node) for key, node in SCHEMA["properties"][section]["properties"].items()}
    if section == "search":
        found["top_k"] = SCHEMA["properties"]["validation"]["properties"]["top_k"]
    return found


def cases():
    yield "search", SearchSettings, lambda **given: SearchSettings(**given)
    for name in WITH_OPTIONS:
        method = methods.get(name)
        yield name, method.options, lambda method=method, **given: method.options_of(given)


CASES = list(cases())


@pytest.mark.parametrize("section, typed, build", CASES, ids=[case[0] for case in CASES])
def test_the_schema_and_the_dataclass_hold_the_same_keys_and_defaults(section, typed, build):
    keys = schema_keys(section)
    defaults = typed.defaults()
    assert set(defaults) == set(keys)
    for key, schema in keys.items():
        default = defaults[key]
        assert (list(default) if isinstance(default, tuple) else default) == schema["default"], key


@pytest.mark.parametrize("section, typed, build", CASES, ids=[case[0] for case in CASES])
def test_a_value_is_refused_exactly_where_the_schema_refuses_it(section, typed, build):
    """Every probe value of every key: accepted by the dataclass if and only if the schema accepts
    it, and refused naming the key and what is valid."""
    for key, schema in schema_keys(section).items():
        for value in PROBES:
            schema_accepts = Draft202012Validator({**schema, "$defs": SCHEMA["$defs"]}).is_valid(value)
            try:
                build(**{key: value})
                accepted = True
            except ValueError as error:
                accepted = False
                named = key if section == "search" else f"{section}.{key}"
                assert str(error).startswith(f"{named}: "), str(error)
            assert accepted == schema_accepts, f"{section}.{key} = {value!r}"


def test_an_unknown_option_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"method 'chg' has no option 'step'; its options are seeds \(default 4\), "
                                         r"lam \(default 0.1\), steps \(default 500\)"):
        methods.get("chg").options_of({"step": 3})
    with pytest.raises(ValueError, match="method 'greedy' takes no options, got {'steps': 3}"):
        SearchSettings(options={"greedy": {"steps": 3}})


def test_one_methods_options_are_refused_for_another():
    """Options already built (a library user's SearchSettings, what the workflow carries to a job)
    belong to one method: another method's are refused naming both, never read as its own."""
    gt = methods.get("group_testing").options_of({"extra_heads": 1})
    with pytest.raises(ValueError, match=r"method 'conditional_group_testing' was given the options of method "
                                         r"'group_testing' \(\{'group_size': 'auto', 'masks_per_round': 1, "
                                         r"'extra_heads': 1\}\); expected its own \(group_size, extra_heads, background, pair_screen\) "):
        SearchSettings(options={"conditional_group_testing": gt})
    assert SearchSettings(options={"group_testing": gt}).options["group_testing"] is gt  # its own: as built


def test_a_task_s_settings_are_its_own_search_keys_over_the_section():
    config = accuracy_demo()
    config["search"].update(n_masks=200, sparsity=0.1, seed=4)
    config["tasks"]["ioi"]["search"] = {"n_masks": 50, "methods": ["greedy"]}
    config["group_testing"] = {"extra_heads": 0}
    validate_config(config, REPO / "config/schema.yaml")
    ioi, capitals = task_settings(config, "ioi"), task_settings(config, "capitals")
    assert (ioi.n_masks, ioi.methods, ioi.sparsity, ioi.seed) == (50, ("greedy",), 0.1, 4)
    assert (capitals.n_masks, capitals.methods) == (200, ("cs_stratified",))
    assert ioi.top_k == config["validation"]["top_k"]
    assert ioi.options_of(methods.get("group_testing")).extra_heads == 0
    assert ioi.options_of(methods.get("chg")) == methods.get("chg").options_of()  # its defaults


def test_locate_the_command_and_the_driver_take_their_defaults_from_the_settings():
    from headloc.api.cli import parser
    from headloc.api.locator import locate
    from headloc.methods.driver import drive

    defaults = SearchSettings()
    signature = inspect.signature(locate).parameters
    assert {key: signature[key].default for key in ("top_k", "seed", "sparsity", "alpha")} == {
        "top_k": defaults.top_k, "seed": defaults.seed, "sparsity": defaults.sparsity, "alpha": defaults.alpha}
    # the method is the demo's (its search and the heads its tables validate), not the paper's
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    assert signature["method"].default == demo["validation"]["method"] == demo["search"]["methods"][0]
    command = parser().parse_args(["locate", "--model", "m", "--task", "t"])
    assert (command.top_k, command.seed, command.sparsity, command.alpha, command.method) == (
        defaults.top_k, defaults.seed, defaults.sparsity, defaults.alpha, signature["method"].default)
    assert inspect.signature(drive).parameters["settings"].default is None  # None: SearchSettings()


def test_the_settings_keys_are_built_in_and_no_method_overwrites_a_key_the_config_has():
    """The schema file names no search key and no method; the search keys come from SearchSettings
    (``validation.top_k`` where its field says), and each method with options gets its section,
    after ``search``, from its options class. A method whose section is a key the schema already
    has is refused rather than replacing that key's rules."""
    raw = yaml.safe_load((REPO / "config/schema.yaml").read_text())
    assert not set(raw["properties"]) & {methods.get(name).options.SECTION for name in WITH_OPTIONS}
    assert "properties" not in raw["properties"]["search"] and "top_k" not in raw["properties"]["validation"]["properties"]
    assert list(SCHEMA["properties"]["search"]["properties"]) == [key for key in SearchSettings.defaults() if key != "top_k"]
    assert SCHEMA["properties"]["validation"]["properties"]["top_k"]["default"] == SearchSettings().top_k
    assert "default" not in SCHEMA["$defs"]["n_masks"]  # what a task's own search keys refer to
    sections = list(SCHEMA["properties"])
    assert sections[sections.index("search") + 1:][:len(WITH_OPTIONS)] == WITH_OPTIONS
    assert SCHEMA["properties"]["guided_greedy"]["properties"]["m"] == {
        "description": "Heads of largest estimated drop on each step's short list.", "type": "integer", "minimum": 0,
        "default": 10}
    config = accuracy_demo() | {"guided_greedy": {"n": 3}}  # a key of no method's, refused by the schema
    with pytest.raises(ValueError, match=r"config guided_greedy: unknown key 'n'; valid keys: carry, m, m_abs$"):
        validate_config(config, REPO / "config/schema.yaml")
    raw["properties"]["chg"] = {"type": "string"}
    with pytest.raises(ValueError, match="method chg's options section 'chg' is a key the config already has"):
        with_methods(raw)


@pytest.mark.parametrize("section", ["search", *WITH_OPTIONS])
def test_each_built_description_is_one_line_of_words(section):
    """The descriptions written as indented triple-quoted text in the settings' modules come out as
    one line each (what the printed schema and an editor's completion show), never empty."""
    texts = [node["description"] for node in schema_keys(section).values()]
    texts += [SCHEMA["properties"][section]["description"]] if section != "search" else []
    for text in texts:
        assert text and text == " ".join(text.split()), repr(text)
