"""One default search method: config/schema.yaml (what a config that names no method runs),
config/demo.yaml, ``headloc.locate`` and ``python -m headloc locate`` name the same one, and the
paper's method is one line away."""

import inspect
import subprocess
import sys
from pathlib import Path

import yaml

import headloc
from headloc.api.cli import parser
from headloc.workflow.schema import load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "config" / "schema.yaml"


def defaults() -> dict[str, str]:
    schema = load_schema(SCHEMA)  # the file with the search keys built in
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    (locate,) = [a for a in parser()._actions if a.dest == "command"][0].choices.values()
    (cli,) = [a.default for a in locate._actions if a.dest == "method"]
    (schema_method,) = schema["properties"]["search"]["properties"]["methods"]["default"]
    (demo_method,) = demo["search"]["methods"]
    assert demo["validation"]["method"] == demo_method
    return {"config/schema.yaml": schema_method, "config/demo.yaml": demo_method,
            "headloc.locate": inspect.signature(headloc.locate).parameters["method"].default,
            "python -m headloc locate": cli}


def test_the_four_places_name_one_method():
    found = defaults()
    assert len(set(found.values())) == 1, f"the default method differs: {found}"


def test_the_command_says_its_default():
    help_text = subprocess.run([sys.executable, "-m", "headloc", "locate", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert f"(default: {defaults()['headloc.locate']})" in " ".join(help_text.split())


def test_a_config_that_names_no_method_searches_and_validates_with_the_default():
    config = {"models": {"m": {"source": "x"}}, "tasks": {"ioi": {"lm_eval_task": "headloc_ioi"}}}
    validate_config(config, SCHEMA)
    default = defaults()["headloc.locate"]
    assert config["search"]["methods"] == [default] and config["validation"]["method"] == default


def test_the_papers_method_is_one_line_away():
    """`search: {methods: [cs_stratified]}` alone runs and validates the paper's method."""
    config = {"models": {"m": {"source": "x"}}, "tasks": {"ioi": {"lm_eval_task": "headloc_ioi"}},
              "search": {"methods": ["cs_stratified"]}}
    validate_config(config, SCHEMA)
    assert config["validation"]["method"] == "cs_stratified"
    paper = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert paper["search"]["methods"][0] == paper["validation"]["method"] == "cs_stratified"
    assert "methods: [cs_stratified]" in (REPO / "docs" / "paper-grid.md").read_text()
