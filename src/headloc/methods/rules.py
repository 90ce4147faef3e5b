"""What a config key accepts, once for the checks and the config file's schema: a :class:`Rule`
holds its words for errors, its test in Python and the same test as JSON schema
(:mod:`headloc.workflow.schema` builds the schema's entries for the search keys and every
method's options from them). The settings (:mod:`headloc.methods.settings`) name one for each key.

>>> rule = integer(2)
>>> rule.valid(3), rule.valid(1), rule.expected, rule.schema
(True, False, 'an integer >= 2', {'type': 'integer', 'minimum': 2})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    """What one key accepts: ``expected``, in the words of the config's errors, ``valid`` its test,
    ``schema`` the same as JSON schema (the config file's check: :mod:`headloc.workflow.schema`
    builds the key's entry from it) and ``read`` how a valid value is kept (a list as a tuple, so
    that settings stay frozen)."""

    expected: str
    valid: Callable[[object], bool]
    schema: dict = field(default_factory=dict)
    read: Callable = lambda value: value  # noqa: E731 (a default, not a method)


def integer(least: int) -> Rule:
    return Rule(f"an integer >= {least}", lambda v: _integer(v) and v >= least, {"type": "integer", "minimum": least})


def integer_or(least: int, word: str) -> Rule:
    return Rule(f"an integer >= {least} or {word}", lambda v: v == word or (_integer(v) and v >= least),
                {"oneOf": [{"type": "integer", "minimum": least}, {"const": word}]})


def zero_or_at_least(least: int, zero_means: str) -> Rule:
    """0 (``zero_means``: what it turns off) or an integer >= ``least``."""
    return Rule(f"0 ({zero_means}) or an integer >= {least}", lambda v: _integer(v) and (v == 0 or v >= least),
                {"anyOf": [{"enum": [0]}, {"type": "integer", "minimum": least}]})


def number_in(low: float, high: float | None = None, *, closed: bool = False) -> Rule:
    """A number in (low, high), or above ``low`` (``>= low`` when ``closed``)."""
    if high is None:
        words = f"a number {'>=' if closed else '>'} {low:g}"
        return Rule(words, lambda v: _number(v) and (v >= low if closed else v > low),
                    {"type": "number", "minimum" if closed else "exclusiveMinimum": low})
    return Rule(f"a number in ({low:g}, {high:g})", lambda v: _number(v) and low < v < high,
                {"type": "number", "exclusiveMinimum": low, "exclusiveMaximum": high})


def choice(*values: str) -> Rule:
    return Rule("one of: " + ", ".join(values), lambda v: isinstance(v, str) and v in values, {"enum": list(values)})


def flag() -> Rule:
    return Rule("true or false", lambda v: isinstance(v, bool), {"type": "boolean"})


def penalty() -> Rule:
    """The Lasso penalty: a number >= 0, or ``cv`` (cross-validated)."""
    return Rule("a number >= 0 or one of: cv", lambda v: v == "cv" or (_number(v) and v >= 0),
                {"anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "enum": ["cv"]}]})


def numbers(count: int) -> Rule:
    return Rule(f"a list of {count} numbers", lambda v: isinstance(v, (list, tuple)) and len(v) == count
                and all(_number(x) for x in v),
                {"type": "array", "items": {"type": "number"}, "minItems": count, "maxItems": count}, read=tuple)


def distinct(item: Rule, *, least_items: int = 0) -> Rule:
    """A list of distinct items, each valid by ``item``, at least ``least_items`` of them."""
    def valid(value):
        return (isinstance(value, (list, tuple)) and len(value) >= least_items and len(set(value)) == len(value)
                and all(item.valid(x) for x in value))

    schema = {"type": "array", "uniqueItems": True, "items": item.schema} | (
        {"minItems": least_items} if least_items else {})
    return Rule(f"a list of distinct items (items: {item.expected})", valid, schema, read=tuple)


def method_name() -> Rule:
    """A registered search method; the registry names the known ones when it is not (read when
    checked, not when this module is imported: the method modules import it)."""
    from headloc.methods.registry import get

    return Rule("a registered search method", lambda v: get(v) is not None, {"$ref": "#/$defs/method"})
