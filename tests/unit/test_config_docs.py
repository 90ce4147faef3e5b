"""Every config key is validated by the schema and documented in config/README.md."""

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "config/schema.yaml").read_text())


def schema_keys(node, prefix=""):
    """Dotted key paths, with <name> for user-chosen mapping keys."""
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        yield path
        yield from schema_keys(child, path + ".")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_keys(node["additionalProperties"], prefix + "<name>.")


def test_every_schema_key_has_a_description_and_is_documented():
    readme = (REPO / "config/README.md").read_text()
    keys = list(schema_keys(SCHEMA))
    assert "search.sparsity" in keys and "models.<name>.source" in keys
    undocumented = [key for key in keys if f"`{key}`" not in readme]
    assert not undocumented


@pytest.mark.parametrize("config", ["demo.yaml", "config.yaml"])
def test_shipped_configs_are_valid(config):
    from snakemake.utils import validate

    validate(yaml.safe_load((REPO / "config" / config).read_text()), str(REPO / "config/schema.yaml"))
