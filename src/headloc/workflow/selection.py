"""Which heads a table reports: task-specific top-k, universal heads and knowledge heads.

Pure functions of the recovered rankings (``recovery.json["ranking"]``, most damaging first), so the
workflow's input functions (which head sets to evaluate) and its collection step (which rows the
tables show) apply one rule.

* **Universal heads** (paper section 6.1) degrade many unrelated tasks. Measured by default
  (``universal.detect: damage``, :mod:`headloc.workflow.universal`: the workflow passes them in,
  :func:`with_universal`); by the paper's overlap rule (``detect: ranking``) a head *hits* a task
  when it is among the ``top_n`` of the task's ranking, and is universal when the tasks it hits
  span at least ``min_capabilities`` distinct capabilities.
* **Task-specific heads** are a task's ranking with the universal heads left out, cut at ``k``.
* **Knowledge heads** (paper section 6.2) are shared by several knowledge tasks: among the
  task-specific ``top_n`` of at least ``min_tasks`` of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from headloc.heads import parse_head


def universal_heads(rankings: Mapping[str, Sequence[str]], capabilities: Mapping[str, str], *,
                    top_n: int = 5, min_capabilities: int = 2,
                    given: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Universal heads mapped to the tasks they hit, ordered by (layer, head). ``given`` (the
    config's ``universal.heads`` of the model) names them instead of detecting them: each is
    then mapped to the tasks it hits, possibly none.

    >>> rankings = {"gsm8k": ["L1H2", "L5H0"], "mbpp": ["L1H2", "L7H3"], "arith": ["L5H0", "L1H2"]}
    >>> caps = {"gsm8k": "math", "mbpp": "code", "arith": "math"}
    >>> universal_heads(rankings, caps, top_n=2, min_capabilities=2)
    {'L1H2': ['gsm8k', 'mbpp', 'arith']}
    >>> universal_heads(rankings, caps, top_n=2, min_capabilities=2, given=["L7H3", "L0H0"])
    {'L0H0': [], 'L7H3': ['mbpp']}
    """
    hits: dict[str, list[str]] = {}
    for task, ranking in rankings.items():
        for head in ranking[:top_n]:
            hits.setdefault(head, []).append(task)
    if given is not None:
        universal = {head: hits.get(head, []) for head in given}
    else:
        universal = {head: tasks for head, tasks in hits.items()
                     if len({capabilities[task] for task in tasks}) >= min_capabilities}
    return dict(sorted(universal.items(), key=lambda item: parse_head(item[0])))


def model_universal_heads(rankings: Mapping[str, Sequence[str]], capabilities: Mapping[str, str],
                          rule: Mapping, model: str | None) -> dict[str, list[str]]:
    """:func:`universal_heads` as the config's ``universal`` section (``rule``) asks for one model:
    its ``heads`` when the model is listed there, else detected with ``top_n`` and ``min_capabilities``
    (``detect: ranking``). Heads detected from damage are measured (headloc.workflow.universal): a
    caller passes them as the model's ``heads`` (:func:`with_universal`); ValueError without them."""
    given = rule.get("heads", {}).get(model)
    if given is None and rule.get("detect", "ranking") != "ranking":
        raise ValueError(f"model {model}'s universal heads are detected by {rule['detect']}: read them from "
                         "rule universal_heads' file (with_universal), not from the rankings")
    return universal_heads(rankings, capabilities, top_n=rule["top_n"], min_capabilities=rule["min_capabilities"],
                           given=rule.get("heads", {}).get(model))


def with_universal(options: Mapping, found: Mapping[str, Sequence[str]]) -> dict:
    """Selection options (:meth:`headloc.workflow.plan.Plan.selection_options`) whose universal heads
    of each model in ``found`` (model -> heads: rule universal_heads' files, detected or given) are
    those, so that every table selects the heads the workflow found.

    >>> with_universal({"universal": {"filter": True, "heads": {}}}, {"m": ["L1H5"]})["universal"]["heads"]
    {'m': ['L1H5']}
    """
    universal = {**options["universal"]}
    universal["heads"] = {**universal.get("heads", {}), **{model: list(heads) for model, heads in found.items()}}
    return {**options, "universal": universal}


def task_heads(ranking: Sequence[str], k: int, exclude: Iterable[str] = ()) -> list[str]:
    """The top ``k`` of ``ranking`` without the heads in ``exclude``.

    >>> task_heads(["L1H2", "L3H0", "L4H4", "L0H1"], 2, exclude=["L1H2"])
    ['L3H0', 'L4H4']
    """
    excluded = set(exclude)
    return [head for head in ranking if head not in excluded][:k]


def knowledge_heads(rankings: Mapping[str, Sequence[str]], tasks: Sequence[str], *, top_n: int = 5,
                    min_tasks: int | None = None, exclude: Iterable[str] = ()) -> dict[str, list[str]]:
    """Heads in the filtered ``top_n`` of at least ``min_tasks`` (default: all) of ``tasks``.

    Returns each head with the tasks it is shared by, ordered by (layer, head); no tasks, no heads.

    >>> rankings = {"bio": ["L0H22", "L3H1"], "chem": ["L0H22", "L9H9"], "cyber": ["L2H2", "L0H22"]}
    >>> knowledge_heads(rankings, ["bio", "chem", "cyber"], top_n=2)
    {'L0H22': ['bio', 'chem', 'cyber']}
    """
    if not tasks:
        return {}
    needed = len(tasks) if min_tasks is None else min_tasks
    counts: dict[str, list[str]] = {}
    for task in tasks:
        for head in task_heads(rankings[task], top_n, exclude):
            counts.setdefault(head, []).append(task)
    shared = {head: hit for head, hit in counts.items() if len(hit) >= needed}
    return dict(sorted(shared.items(), key=lambda item: parse_head(item[0])))


def select_heads(rankings: Mapping[tuple[str, str], Sequence[str]], main: Mapping[str, str],
                 capabilities: Mapping[str, str], *, k: int, universal: Mapping,
                 knowledge: Mapping, model: str | None = None) -> dict:
    """Every head one model's tables report, from its rankings keyed by (task, search).

    ``main`` maps each searched task to its main-method search; ``universal`` holds the config's
    ``top_n``, ``min_capabilities``, ``filter`` and ``heads`` (given universal heads per model:
    ``model``'s are used instead of detected ones when listed), ``knowledge`` its ``tasks``, ``top_n`` and
    ``min_tasks``. Returns ``{"universal": {head: tasks}, "knowledge": {head: tasks},
    "task": {(task, search): top-k heads}, "unfiltered": {(task, search): top-k heads}}``, the task
    heads without the universal ones when ``universal["filter"]``, the unfiltered ones the ranking's
    own top k (what Table 4 shows beside them).

    >>> rankings = {("a", "cs"): ["L0H0", "L1H1", "L2H2"], ("b", "cs"): ["L0H0", "L3H3", "L1H1"]}
    >>> picked = select_heads(rankings, {"a": "cs", "b": "cs"}, {"a": "math", "b": "code"}, k=2,
    ...     universal={"top_n": 1, "min_capabilities": 2, "filter": True},
    ...     knowledge={"tasks": [], "top_n": 5, "min_tasks": None})
    >>> picked["universal"], picked["task"][("b", "cs")]
    ({'L0H0': ['a', 'b']}, ['L3H3', 'L1H1'])
    """
    main_rankings = {task: rankings[(task, search)] for task, search in main.items()}
    found = model_universal_heads(main_rankings, capabilities, universal, model)
    exclude = list(found) if universal["filter"] else []
    shared = knowledge_heads(main_rankings, knowledge["tasks"], top_n=knowledge["top_n"],
                             min_tasks=knowledge["min_tasks"], exclude=exclude)
    return {
        "universal": found,
        "knowledge": shared,
        "task": {key: task_heads(ranking, k, exclude) for key, ranking in rankings.items()},
        "unfiltered": {key: list(ranking[:k]) for key, ranking in rankings.items()},
    }
