"""The workflow config against config/schema.yaml: defaults filled in, and each error worded by its
key path (``config <key.path>: <bad value> ...; expected ...``). The first of the checks
:func:`headloc.workflow.config.check_workflow_config` makes.

The file holds the workflow's own keys. The keys the library reads too are built in from the
settings, where each key's rule, default and description are written once
(:mod:`headloc.methods.settings`): the search keys (``search.<key>``, ``validation.top_k``) from
``SearchSettings``, and from the registry (headloc.methods) its method enums and each method's
options section, so a new method module needs no edit of the schema file."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import yaml

from headloc import methods as search_methods
from headloc.methods.settings import SearchSettings

Problem = tuple[str, str]  # (config key, what is wrong and what is valid): "config <key>: <text>"


def validate_config(config: dict, schema_path) -> None:
    """Validate ``config`` against the JSON schema at ``schema_path``, setting defaults in place."""
    from jsonschema import Draft202012Validator, validators

    schema = load_schema(schema_path)
    base = Draft202012Validator
    properties = base.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if "default" in subschema:
                    instance.setdefault(name, _copy(subschema["default"]))
        yield from properties(validator, props, instance, schema)

    validator = validators.extend(base, {"properties": set_defaults})(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise ValueError("\n".join(dict.fromkeys(_describe(error) for error in errors)))
    # the main method, when not named: the first method searched (the default search's, or the one
    # line `search: {methods: [cs_stratified]}` that runs the paper's method)
    config["validation"].setdefault("method", config["search"]["methods"][0])


def load_schema(schema_path) -> dict:
    """The config schema as the workflow checks a config: the file with the search keys and the
    methods built in."""
    return with_methods(with_search_settings(yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))))


def with_search_settings(schema: dict) -> dict:
    """The schema with the search keys of :class:`~headloc.methods.settings.SearchSettings` built
    in: each as ``search.<key>`` (``validation.top_k`` where its field says so) with its default,
    and as ``$defs.<key>`` without one, for the keys that refer to it (a task's own ``search``
    keys, the tuning grid's items)."""
    for item in fields(SearchSettings):
        if "rule" not in item.metadata:  # the methods' options: their own sections
            continue
        schema["$defs"][item.name] = described(item)
        section, key = (item.metadata["key"] or f"search.{item.name}").split(".")
        keys = schema["properties"][section].setdefault("properties", {})
        keys[key] = described(item) | {"default": _as_config(item.default)}
    return schema


def with_methods(schema: dict) -> dict:
    """The schema with the methods filled in from the registry (headloc.methods): every registered
    method for ``search.methods`` and ``validation.method``, the methods whose budgets nest for
    ``tuning.method``, and each method's options section after ``search``
    (:func:`options_section`). The schema file names none."""
    schema["$defs"]["method"]["enum"] = search_methods.names()
    nested = [name for name in search_methods.names() if search_methods.get(name).nested]
    schema["properties"]["tuning"]["properties"]["method"]["enum"] = nested
    sections = {}
    for name in search_methods.names():
        options = search_methods.get(name).options
        if options is not None:
            if options.SECTION in schema["properties"]:
                raise ValueError(f"method {name}'s options section {options.SECTION!r} is a key the config "
                                 "already has; expected a section name of its own")
            sections[options.SECTION] = options_section(options)
    at = list(schema["properties"]).index("search") + 1
    items = list(schema["properties"].items())
    schema["properties"] = dict(items[:at] + list(sections.items()) + items[at:])
    return schema


def options_section(options) -> dict:
    """A method's options section of the schema, from its options dataclass
    (:class:`headloc.methods.settings.MethodOptions`): its docstring, and each key's rule, default
    and ``doc``."""
    keys = {item.name: described(item) | {"default": _as_config(item.default)} for item in fields(options)}
    return {"description": " ".join(inspect.cleandoc(options.__doc__).split()), "type": "object",
            "additionalProperties": False, "default": {}, "properties": keys}


def described(item) -> dict:
    """A settings field (:func:`headloc.methods.settings.setting`) as JSON schema: its ``doc`` and
    its rule's schema."""
    return {"description": item.metadata["doc"], **item.metadata["rule"].schema}


def _as_config(value):
    return list(value) if isinstance(value, tuple) else value


def _copy(value):
    return yaml.safe_load(yaml.safe_dump(value)) if isinstance(value, (dict, list)) else value


def key_path(parts) -> str:
    """``['models', 'x', 'dtype'] -> 'models.x.dtype'``; list indices as ``[0]``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error) -> str:
    key = key_path(error.absolute_path)
    where = f"config {key}" if key else "config"
    value, schema, rule = error.instance, error.schema, error.validator
    if rule == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(value) - set(allowed))
        return (f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; valid keys: {', '.join(allowed)}")
    if rule == "required":
        missing = [name for name in error.validator_value if name not in value]
        return f"{where}: missing key {', '.join(map(repr, missing))}; required: {', '.join(schema['required'])}"
    if rule in ("minProperties", "minItems"):
        return f"{where}: {value!r} is empty; expected at least {error.validator_value} entr" + (
            "y" if error.validator_value == 1 else "ies")
    if rule == "uniqueItems":
        return f"{where}: {value!r} repeats an item; expected each item at most once"
    if rule == "propertyNames":
        return f"{where}: bad name ({error.message}); expected names matching {schema['propertyNames']['pattern']}"
    bound = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    if rule in bound:
        return f"{where}: {value!r} is not {bound[rule]} {error.validator_value}; expected {expected(schema)}"
    if rule in ("enum", "type", "anyOf", "oneOf", "pattern", "const"):
        return f"{where}: {value!r} is not valid; expected {expected(schema)}"
    return f"{where}: {error.message}"


_ARTICLE = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
            "array": "a list", "object": "a mapping", "null": "null"}


def expected(schema: dict) -> str:
    """What a schema accepts, in words: 'a number in (0, 1)', 'one of: cv', 'an integer >= 1 or null'."""
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(expected(sub) for sub in schema.get("anyOf", schema.get("oneOf")))
    if "enum" in schema:
        return "one of: " + ", ".join(str(v) for v in schema["enum"])
    if "pattern" in schema:
        return f"a string matching {schema['pattern']}"
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    words = []
    for type_name in types:
        word = _ARTICLE.get(type_name, type_name)
        if type_name in ("integer", "number"):
            word += _range(schema)
        elif type_name == "array" and isinstance(schema.get("items"), dict):
            items = expected(schema["items"])
            word += f" (items: {items})" if items else ""
        words.append(word)
    return " or ".join(words)


def _range(schema: dict) -> str:
    low = ("(", schema["exclusiveMinimum"]) if "exclusiveMinimum" in schema else (
        ("[", schema["minimum"]) if "minimum" in schema else None)
    high = (")", schema["exclusiveMaximum"]) if "exclusiveMaximum" in schema else (
        ("]", schema["maximum"]) if "maximum" in schema else None)
    if low and high:
        return f" in {low[0]}{low[1]}, {high[1]}{high[0]}"
    if low:
        return f" {'>' if low[0] == '(' else '>='} {low[1]}"
    if high:
        return f" {'<' if high[0] == ')' else '<='} {high[1]}"
    return ""


if __name__ == "__main__":  # python -m headloc.workflow.schema config/schema.yaml: the whole schema, as JSON
    import json
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m headloc.workflow.schema SCHEMA_YAML (config/schema.yaml of a checkout)")
    print(json.dumps(load_schema(sys.argv[1]), indent=1))
