"""Every config key is validated by the schema and documented in config/README.md, and every shipped
config passes the workflow's own checks."""

import re
from pathlib import Path

import pytest
import yaml

from headloc.workflow.schema import load_schema

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema(REPO / "config/schema.yaml")  # the file, each method's options section built in


def resolved(node):
    """A schema node with its local $ref (#/$defs/...) merged in; the node's own keys win."""
    ref = node.get("$ref")
    if ref is None:
        return node
    assert ref.startswith("#/$defs/"), ref
    return {**resolved(SCHEMA["$defs"][ref.removeprefix("#/$defs/")]),
            **{k: v for k, v in node.items() if k != "$ref"}}


def schema_nodes(node, prefix=""):
    """(dotted key path, resolved schema node), with <name> for user-chosen mapping keys."""
    for key, child in node.get("properties", {}).items():
        path, child = f"{prefix}{key}", resolved(child)
        yield path, child
        yield from schema_nodes(child, path + ".")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_nodes(resolved(node["additionalProperties"]), prefix + "<name>.")


def readme_rows(text):
    """Where config/README.md documents a key: {key: its text}, from table rows
    `| `key` | default | meaning |` (the meaning) and section headings `## `key`: text` (the text)."""
    rows = {}
    for line in text.splitlines():
        heading = re.fullmatch(r"## `([^`]+)`:(.*)", line.strip())
        if heading:
            rows[heading[1]] = heading[2].strip()
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[^`]+`", cells[0]):
            rows[cells[0].strip("`")] = cells[2]
    return rows


def words(text):
    return re.findall(r"[A-Za-z]{2,}", text)


KEYS = dict(schema_nodes(SCHEMA))
README_ROWS = readme_rows((REPO / "config/README.md").read_text())


def test_the_schema_walk_finds_nested_and_named_keys():
    assert {"search.sparsity", "models.<name>.source", "tasks.<name>.search.n_masks",
            "data.allow_code_execution"} <= set(KEYS)
    assert "smollm2-135m" not in str(list(KEYS)), "user-chosen names appear as <name>"


@pytest.mark.parametrize("key", sorted(KEYS))
def test_every_schema_key_has_a_description(key):
    description = KEYS[key].get("description")
    assert isinstance(description, str) and len(words(description)) >= 3, (
        f"config/schema.yaml: {key} has no description (got {description!r})")


@pytest.mark.parametrize("key", sorted(KEYS))
def test_every_schema_key_is_documented(key):
    assert key in README_ROWS, f"config/README.md has no table row | `{key}` | default | meaning |"
    meaning = README_ROWS[key]
    leaf = key.rsplit(".", 1)[-1]
    assert len([w for w in words(meaning) if w != leaf]) >= 3, (
        f"config/README.md: the row of {key} says nothing beyond its name: {meaning!r}")


@pytest.mark.parametrize("key", ["sparsity", "alpha", "chunks"])
def test_the_methods_a_key_row_says_read_it_are_those_that_do(key):
    """config/README.md names the methods that read search.sparsity, alpha and chunks; the list is
    the one the config check's note gives (headloc.methods.reads), not a copy that can drift."""
    from headloc.methods.reads import readers

    listed = re.search(r"Read by the [^(]*\(([^)]*)\)", README_ROWS[f"search.{key}"])
    assert listed, f"config/README.md's row of search.{key} names no readers"
    assert re.findall(r"`(\w+)`", listed[1]) == readers(key)


def test_readme_documents_no_key_the_schema_lacks():
    assert sorted(set(README_ROWS) - set(KEYS)) == []


# the workflow's configs; ground_truth.yaml is the planted models' recipe (ground_truth.smk)
CONFIGS = sorted(path.name for path in (REPO / "config").glob("*.yaml")
                 if path.name not in ("schema.yaml", "ground_truth.yaml"))


def test_every_shipped_config_is_checked():
    assert {"config.yaml", "demo.yaml", "methods.yaml"} <= set(CONFIGS)


def test_the_ground_truth_config_makes_a_recipe_of_every_model():
    """config/ground_truth.yaml is checked by the recipe it feeds (its design's rules, each model's keys)."""
    from headloc.groundtruth.recipe import load_config, model_entries, recipe_from_config

    config = load_config(REPO / "config/ground_truth.yaml")
    recipes = {name: recipe_from_config(config, name) for name in model_entries(config)}
    certified = [f"{family}{n}-s{seed}" for family in "ci" for n in (32, 270, 1024) for seed in range(3)]
    held_out = [f"i{n}-s{seed}" for n in (270, 1024) for seed in (3, 4, 5)]
    assert set(recipes) == {"tiny", "smol", "large", *certified, *held_out} and config["build"] == certified
    assert config["held_out"] == held_out  # never built by default, so never tuned on
    assert {recipes[name].size.n_heads for name in certified} == {32, 270, 1024}
    # three placements per size, each its own draw
    assert len({str(recipes[name].placement()) for name in certified + held_out}) == len(certified + held_out)


@pytest.mark.parametrize("config", CONFIGS)
def test_shipped_configs_are_valid(config, monkeypatch):
    """Each config passes every check the Snakefile makes on it (schema, models, cross-key rules, plan),
    its relative paths read from the checkout as in `snakemake --configfile config/<name>`. Hub models
    not in the local cache (config.yaml's) have no known geometry offline: their head checks wait
    for their jobs, as in the workflow."""
    from headloc.workflow.config import check_workflow_config

    monkeypatch.chdir(REPO)
    check_workflow_config(yaml.safe_load((REPO / "config" / config).read_text()), REPO / "config/schema.yaml")


def test_the_whole_schema_printed_as_json_checks_configs_as_the_workflow_does():
    """``python -m headloc.workflow.schema config/schema.yaml`` (docs/configuration.md) prints the
    schema with its built-in keys: read by jsonschema alone, it accepts every shipped config and
    refuses a bad value of a built-in key where the workflow does."""
    import json
    import subprocess
    import sys

    from jsonschema import Draft202012Validator

    ran = subprocess.run([sys.executable, "-m", "headloc.workflow.schema", "config/schema.yaml"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    validator = Draft202012Validator(json.loads(ran.stdout))
    for config in CONFIGS:
        assert not list(validator.iter_errors(yaml.safe_load((REPO / "config" / config).read_text()))), config
    demo = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    bad = demo | {"search": demo["search"] | {"sparsity": 2}, "guided_greedy": {"m": -1}}
    assert sorted(error.json_path for error in validator.iter_errors(bad)) == ["$.guided_greedy.m", "$.search.sparsity"]
