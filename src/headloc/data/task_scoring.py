"""How a task scores, read from its YAML (:func:`headloc.data.documents.load_task_yaml`'s merged
dict) without running it: the ``metric,filter`` keys it reports (:func:`reported_metrics`,
:func:`reported_filters`; None where only a run can tell), whether a higher metric is better
(:func:`metric_direction`), and whether its target is a gold continuation a gradient method can
differentiate (:func:`gold_problem`).

Apart from :mod:`headloc.data.documents` (a task's files, templates and documents): this follows
lm-eval's scoring (its metric registry, default metrics and filters) and answers what ranking heads
and choosing a method need to know of a task.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from headloc.data.documents import lm_eval_tasks_dir

# The metrics of a task without metric_list, per output_type (lm-eval's DEFAULT_METRIC_REGISTRY).
DEFAULT_METRICS = {
    "loglikelihood": ["perplexity", "acc"],
    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    "multiple_choice": ["acc", "acc_norm"],
    "generate_until": ["exact_match"],
}


@functools.lru_cache(maxsize=1)
def lm_eval_metrics() -> frozenset[str]:
    """The metrics registered in lm-eval (``@register_metric(metric=...)`` in lm_eval/api/metrics.py),
    read as text, without importing lm-eval."""
    source = lm_eval_tasks_dir().parent / "api" / "metrics.py"
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    return frozenset(re.findall(r"register_metric\(\s*metric\s*=\s*['\"]([^'\"]+)['\"]", text))


def reported_filters(task_config: dict) -> list[str] | None:
    """The filter names a task reports each metric under (``metric,filter``): its ``filter_list``
    names, or ``none`` without one; None when only a run can tell (a Python task ``class``).

    >>> reported_filters({}), reported_filters({"filter_list": [{"name": "first-number", "filter": []}]})
    (['none'], ['first-number'])
    """
    if "class" in task_config:
        return None
    filters = task_config.get("filter_list")
    if filters is None:
        return ["none"]
    if isinstance(filters, list) and filters and all(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) for entry in filters):
        return [entry["name"] for entry in filters]
    return None


def reported_metrics(task_config: dict) -> list[str] | None:
    """The metric names a task reports, read from its YAML: its ``metric_list`` names, or lm-eval's
    defaults for its ``output_type`` without one.

    None when only a run can tell: a Python task ``class``; ``process_results`` (the keys of the
    dict it returns); a ``!function`` metric (named after the function); a generation metric
    outside lm-eval's registry or with ``hf_evaluate`` (Hugging Face evaluate's results name their
    own keys).

    >>> reported_metrics({"output_type": "multiple_choice"}), reported_metrics({"process_results": None})
    (['acc', 'acc_norm'], None)
    """
    if "class" in task_config or "process_results" in task_config:
        return None
    output_type = task_config.get("output_type") or "generate_until"
    if output_type not in DEFAULT_METRICS:
        return None
    entries = task_config.get("metric_list")
    if entries is None:
        return list(DEFAULT_METRICS[output_type])
    if not isinstance(entries, list) or not entries or not all(
            isinstance(entry, dict) and isinstance(entry.get("metric"), str) for entry in entries):
        return None
    names = [entry["metric"] for entry in entries]
    if output_type == "generate_until" and (any(entry.get("hf_evaluate") for entry in entries)
                                            or not set(names) <= lm_eval_metrics()):
        return None
    return list(dict.fromkeys(names))


# Filters that pass a generation on whole (or only change its case or spaces): after them a
# generate_until task still compares the generation with its target. Any other (regex, custom, ...)
# extracts or rewrites the answer, so the target need not be a continuation the model would write.
WHOLE_ANSWER_FILTERS = frozenset({"take_first", "lowercase", "uppercase", "remove_whitespace"})
GOLD_DECLARATION = "metadata: {gold_target: true}"


def gold_problem(task_config: dict) -> str | None:
    """Why a task has no gold continuation a gradient method can differentiate (None when it has one),
    read from its YAML (``load_task_yaml``'s merged dict).

    The gold continuation is the task's own target: a ``multiple_choice`` task's gold choice
    (``doc_to_target`` into ``doc_to_choice``), a ``loglikelihood`` task's ``doc_to_target``, a
    ``generate_until`` task's ``doc_to_target`` after the delimiter. The last is a correct answer
    only where the task compares the generation with it: no ``process_results`` (a function that
    decides correctness its own way: a word list, a rhyme, running code) and only filters that keep
    the whole answer (:data:`WHOLE_ANSWER_FILTERS`; a regex extracts part of it). A task whose
    function does accept its target as correct says so in its YAML: ``metadata: {gold_target: true}``.
    ``loglikelihood_rolling`` has no continuation; a Python task ``class`` cannot be read.

    >>> gold_problem({"output_type": "multiple_choice", "doc_to_target": "label", "doc_to_choice": "choices"})
    >>> print(gold_problem({"output_type": "generate_until", "doc_to_target": "", "process_results": None}))
    its doc_to_target is empty; and it decides correctness with process_results (a function), so its target need not be a correct answer
    >>> gold_problem({"output_type": "generate_until", "doc_to_target": "word", "process_results": None,
    ...               "metadata": {"version": 1.0, "gold_target": True}})
    """
    if "class" in task_config:
        return "it is a Python task class, whose targets headloc cannot read from its YAML"
    output_type = task_config.get("output_type") or "generate_until"
    if output_type == "loglikelihood_rolling":
        return "its output_type loglikelihood_rolling scores whole documents: there is no continuation to call gold"
    reasons = []
    target = task_config.get("doc_to_target")
    if "doc_to_target" not in task_config:
        reasons.append("it has no doc_to_target")
    elif isinstance(target, str) and not target.strip():
        reasons.append("its doc_to_target is empty")
    if output_type == "multiple_choice" and task_config.get("doc_to_choice") is None and "doc_to_choice" not in task_config:
        reasons.append("it has no doc_to_choice to take the gold choice from")
    declared = (task_config.get("metadata") or {}).get("gold_target") is True
    if output_type == "generate_until" and not declared:
        if "process_results" in task_config:
            reasons.append("it decides correctness with process_results (a function), so its target need not be "
                           "a correct answer")
        filters = sorted({step.get("function") for entry in task_config.get("filter_list") or []
                          if isinstance(entry, dict) for step in entry.get("filter") or [] if isinstance(step, dict)}
                         - WHOLE_ANSWER_FILTERS, key=str)
        if filters:
            reasons.append(f"its filter_list extracts or rewrites the answer ({', '.join(map(str, filters))}), so its "
                           "target need not be what the model writes")
    return "; and ".join(reasons) or None


def metric_direction(task_config: dict, metric: str) -> bool | None:
    """Whether a higher ``metric`` (a name, or ``name,filter``) is better, as lm-eval decides it: the
    ``higher_is_better`` of the task YAML's ``metric_list`` entry for it, else lm-eval's metric
    registry (``lm_eval.api.registry.is_higher_better``); None when neither declares it.

    A declared direction must be a YAML boolean (``true``/``false``, unquoted): anything else
    (``"false"``, ``no`` quoted, ``0``) raises ValueError naming the value, the task and the metric,
    where ``bool()`` would read the string ``"false"`` as true and rank the opposite heads.

    >>> metric_direction({"metric_list": [{"metric": "margin", "higher_is_better": True}]}, "margin,none")
    True
    >>> metric_direction({"output_type": "loglikelihood_rolling"}, "word_perplexity")
    False
    >>> metric_direction({"task": "t", "metric_list": [{"metric": "m", "higher_is_better": "false"}]}, "m")
    Traceback (most recent call last):
    ValueError: task 't', metric_list entry 'm': higher_is_better 'false' is a str, not a boolean; expected True or False (in a task YAML: true or false, unquoted)
    """
    name = metric.split(",")[0]
    for entry in task_config.get("metric_list") or []:
        if isinstance(entry, dict) and entry.get("metric") == name and entry.get("higher_is_better") is not None:
            return checked_direction(entry["higher_is_better"],
                                     f"task {task_config.get('task')!r}, metric_list entry {name!r}")
    import lm_eval.api.metrics  # noqa: F401  (registers lm-eval's metrics and their directions)
    from lm_eval.api.registry import higher_is_better_registry

    return bool(higher_is_better_registry.get(name)) if name in higher_is_better_registry else None


def checked_direction(value, where: str) -> bool:
    """``value`` if it is a boolean (a YAML ``true``/``false``, Python's True/False); else ValueError
    naming ``where`` (the task and its metric), the value and what is valid.

    >>> checked_direction(False, "x")
    False
    >>> checked_direction(0, "task 't', metric 'acc,none'")
    Traceback (most recent call last):
    ValueError: task 't', metric 'acc,none': higher_is_better 0 is a int, not a boolean; expected True or False (in a task YAML: true or false, unquoted)
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{where}: higher_is_better {value!r} is a {type(value).__name__}, not a boolean; expected "
                     "True or False (in a task YAML: true or false, unquoted)")
