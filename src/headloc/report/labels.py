"""Short search labels for the tables a person reads: a search id's method and what it sets that its
method's defaults do not (:func:`search_label`), e.g. ``guided_greedy`` for
``guided_greedy_k5_l10_a10_c0_n20_s0_yheadloc_ioi_margin-margin`` and ``cs_stratified m25`` for a
budget of 25 masks. Markdown, LaTeX and HTML show the label (:mod:`headloc.report.formats`); the
CSV keeps the full id, which names the search's folder (``results/<model>/<task>/<search>/``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from headloc import methods
from headloc.methods.settings import SearchSettings

_TAIL = re.compile(r"n\d+")  # the identification subset, n<docs>_s<seed>[_y<task>-<metric>]
_SEED = re.compile(r"s\d+")
_REPEAT = re.compile(r"r\d+")
_BUDGET = re.compile(r"m(\d+)(?:of\d+)?")


@cache
def _default_tokens(name: str) -> frozenset[str]:
    """The settings a method's search id spells with every default (search section and its options)."""
    method = methods.get(name)
    defaults = SearchSettings()
    parts = methods.SearchParts(tail="", seed=defaults.seed, n_masks=defaults.n_masks, sparsity=defaults.sparsity,
                                top_k=defaults.top_k, options=method.options_of(None))
    return frozenset(method.search_id(parts)[len(name):].split("_")) - {""}


def _method_of(search: str) -> str | None:
    """The registered method a search id starts with (the longest such name); None for none."""
    found = [name for name in methods.registry() if search == name or search.startswith(name + "_")]
    return max(found, key=len, default=None)


def search_label(search: str) -> str:
    """A search id as a person reads it: its method, then each setting it spells that differs from
    the method's default, its budget (``m25``) for a method that spends one and its repeat (``r1``).
    The identification subset (``n<docs>_s<seed>``, the scoring task) is left out: it is one per task.
    An id that starts with no registered method is returned as it is.

    Examples
    --------
    >>> search_label("guided_greedy_k5_l10_a10_c0_n20_s0_yheadloc_ioi_margin-margin")
    'guided_greedy'
    >>> search_label("cs_stratified_m25of200_p0.05_n20_s0_r1")
    'cs_stratified m25 r1'
    >>> search_label("group_testing_m100_k5_g16_per1_x2_n20_s0")
    'group_testing m100 g16'
    >>> search_label("chg_x2_l0.1_t25_n20_s0"), search_label("random_s0_r1"), search_label("my_own_id")
    ('chg x2 t25', 'random r1', 'my_own_id')
    """
    return _split(search)[0]


def _split(search: str) -> tuple[str, str]:
    """(label, what the label leaves out: the identification subset and the seed)."""
    name = _method_of(search)
    if name is None:
        return search, ""
    tokens = search[len(name):].split("_")[1:]
    starts = [i for i in range(len(tokens) - 1) if _TAIL.fullmatch(tokens[i]) and _SEED.fullmatch(tokens[i + 1])]
    repeat = tokens[-1] if tokens and _REPEAT.fullmatch(tokens[-1]) else None
    if starts:
        own, tail = tokens[:starts[0]], tokens[starts[0]:]
    else:  # a method that reads no data (random): its seed only
        own = [t for t in tokens[:len(tokens) - bool(repeat)] if not _SEED.fullmatch(t)]
        tail = [t for t in tokens if _SEED.fullmatch(t)]
    budgeted = methods.get(name).budgeted
    shown = []
    for token in own:
        budget = _BUDGET.fullmatch(token)
        if budget and budgeted:
            shown.append(f"m{budget.group(1)}")
        elif token not in _default_tokens(name):
            shown.append(token)
    return " ".join([name, *shown, *([repeat] if repeat else [])]), "_".join(tail)


def search_labels(searches: Iterable[str]) -> list[str]:
    """:func:`search_label` of each search, but searches that would read alike keep their full ids:
    two of one identification subset (one task's) whose labels are equal. Searches of different
    tasks may share a label (``guided_greedy`` on ioi and on capitals): the task tells them apart.

    >>> search_labels(["greedy_k5_n20_s0", "greedy_k3_n20_s0", "greedy_k5_n50_s0_yt-acc"])
    ['greedy', 'greedy k3', 'greedy']
    >>> search_labels(["cs_stratified_m25of200_p0.05_n20_s0", "cs_stratified_m25_p0.05_n20_s0"])
    ['cs_stratified_m25of200_p0.05_n20_s0', 'cs_stratified_m25_p0.05_n20_s0']
    """
    searches = [str(search) for search in searches]
    split = {search: _split(search) for search in dict.fromkeys(searches)}
    keys = list(split.values())
    return [search if keys.count(split[search]) > 1 else split[search][0] for search in searches]
