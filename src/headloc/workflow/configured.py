"""A validated config (defaults filled in) read once, with one merge rule, for the checks
(:mod:`headloc.workflow.config`) and the plan (:mod:`headloc.workflow.plan`) alike: which tasks
are searched, and each one's :class:`~headloc.methods.settings.SearchSettings` (its own
``tasks.<name>.search`` keys over the ``search`` section, ``validation.top_k`` and every
method's options section).

>>> config = {"tasks": {"ioi": {"search": {"n_masks": 50}}, "mmlu": {"localize": False}},
...           "search": {"n_masks": 100, "seed": 3}, "validation": {"top_k": 2}}
>>> searched_tasks(config)
['ioi']
>>> settings = task_settings(config, "ioi")
>>> settings.n_masks, settings.seed, settings.top_k, task_settings(config).n_masks
(50, 3, 2, 100)
>>> setting_key(config, "ioi", "n_masks"), setting_key(config, "ioi", "seed")
('tasks.ioi.search.n_masks', 'search.seed')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from headloc.methods.registry import registry
from headloc.methods.settings import SearchSettings

def searched_tasks(config: Mapping) -> list[str]:
    """The tasks heads are searched on (``localize: true``), in the config's order."""
    return [name for name, spec in config["tasks"].items() if spec.get("localize", True)]


def task_settings(config: Mapping, task: str | None = None) -> SearchSettings:
    """The search settings of ``task`` (of the ``search`` section alone when None)."""
    own = (config["tasks"][task].get("search") or {}) if task else {}
    keys = {item.name for item in fields(SearchSettings)} - {"top_k", "options"}
    given = {key: value for key, value in {**config.get("search", {}), **own}.items() if key in keys}
    if "top_k" in config.get("validation", {}):
        given["top_k"] = config["validation"]["top_k"]
    options = {name: config.get(name) or {} for name, method in registry().items() if method.options}
    return SearchSettings(**given, options=options)


def setting_key(config: Mapping, task: str, key: str) -> str:
    """The config key that set a task's search setting ``key``: its own, or the search section's."""
    own = config["tasks"][task].get("search") or {}
    return f"tasks.{task}.search.{key}" if key in own else f"search.{key}"
