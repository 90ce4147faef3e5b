"""Method kinds: how the methods of one kind spend their evaluations. One small class per kind, in a
module of its own in this package, found by the registry below: adding a kind is its module (and,
for a kind whose search does not run in one job, the rules that run it). A package of its own may
add kinds and methods too, through the ``headloc.methods`` entry-point group (:func:`plugin_modules`).

A kind owns what depends on it: its steps (one function per rule, in its module) and what each is
told (:meth:`Kind.params`, built from one :class:`~headloc.methods.settings.SearchSpec`), the files
the recovery reads (:meth:`Kind.recovery_inputs`), its steps in one process (:meth:`Kind.drive`,
for :func:`headloc.methods.driver.drive`), and the facts the workflow, the config checks, locate
and the benchmarks ask of it (its class attributes). They ask a method's kind (``method.kind``);
only :func:`get` reads a kind by its name.

Every file of one search lies under its folder as :class:`SearchFiles` lays it out, the same for
the workflow (``results/<model>/<task>/<search id>``, :mod:`headloc.workflow.paths`) and the driver.

>>> names()
['draw', 'gradient', 'guided', 'masks', 'rounds', 'sequential']
>>> get("sequential").scored, get("gradient").scored, get("gradient").gold
(True, False, True)
>>> get("search")
Traceback (most recent call last):
...
ValueError: unknown method kind 'search'; known: draw, gradient, guided, masks, rounds, sequential
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True)
class SearchFiles:
    """The files of one search, under its ``folder``; ``stage``: a sub-folder of its own (``stage2``,
    ``round3``; empty for the design), ``chunks``: the scoring jobs that split its masks.

    >>> files = SearchFiles("results/m/ioi/s", chunks=2)
    >>> files.masks("round2"), files.scores()
    ('results/m/ioi/s/round2/masks.npy', ['results/m/ioi/s/scores/0.tsv', 'results/m/ioi/s/scores/1.tsv'])
    """

    folder: str
    chunks: int = 1

    def path(self, name: str, stage: str = "") -> str:
        return "/".join(str(part) for part in (self.folder, stage, name) if part != "")

    def masks(self, stage: str = "") -> str:
        return self.path("masks.npy", stage)

    def score_table(self, stage: str = "", chunk: int | str = 0) -> str:
        """One scoring job's scores (``chunk``: its number, or a wildcard)."""
        return self.path(f"scores/{chunk}.tsv", stage)

    def samples(self, stage: str = "", chunk: int | str = 0) -> str:
        """One scoring job's per-document samples."""
        return self.path(f"scores/{chunk}.samples.jsonl", stage)

    def all_samples(self, stage: str = "") -> list[str]:
        """Every scoring job's per-document samples of a stage's masks."""
        return [self.samples(stage, chunk) for chunk in range(self.chunks)]

    def scores(self, stage: str = "") -> list[str]:
        """Every scoring job's scores of a stage's masks."""
        return [self.score_table(stage, chunk) for chunk in range(self.chunks)]

    def refinement(self) -> str:
        """A two-stage design's decision (stage 2's candidates, or settled)."""
        return self.path("refinement.json", "stage2")

    def chosen(self, round_: int | str) -> str:
        """A greedy round's record: the heads chosen so far."""
        return self.path("chosen.json", f"round{round_}")

    def result(self, kind: str) -> str:
        """The result of a kind's one job, named by the kind (``gradient.json``, ``sequential.json``,
        ``guided.json``)."""
        return self.path(f"{kind}.json")

    def record(self) -> str:
        """A one-job search's record (:mod:`headloc.methods.record`): every mask scored (and every
        gradient taken) so far, to resume from."""
        return self.path("record.npz")


class Kind:
    """What the methods of one kind share (see the module docstring). Class attributes:

    name: the methods' ``kind=``. algorithm: what its methods supply as their ``algorithm``, in
    words (its signature); empty: nothing (their ``recover`` is all). scored: its steps score
    masks on the identification subset (a search id names the scoring task, locate hands the
    driver a scorer, the recovery records the metric's direction). gold: it differentiates the
    gold continuations (an lm-eval task that has them). fixed_design: its ``n_masks`` masks are
    designed up front (a design's size, not a cap). chunked: its masks are scored by
    ``search.chunks`` jobs (rule score_masks and its kin). seeded: its result depends on the seed even
    for a method that does not repeat. rule: the rule of its one model-loading job, whose
    ``search`` wildcard takes this kind's searches only (empty: none). steps: step name -> its
    parameters' dataclass (built by ``.of(search)``), in the rules' order, ``recover`` last.
    unassessed: for a kind whose recovery draws no evidence, its heads' status and the reason.
    """

    name: ClassVar[str] = ""
    algorithm: ClassVar[str] = ""
    scored: ClassVar[bool] = False
    gold: ClassVar[bool] = False
    fixed_design: ClassVar[bool] = False
    chunked: ClassVar[bool] = False
    seeded: ClassVar[bool] = False
    rule: ClassVar[str] = ""
    steps: ClassVar[Mapping[str, type]] = {}
    recover: ClassVar = None  # the recovery its methods have unless they bring their own
    # a kind whose recovery assesses no head's evidence (headloc.search.evidence): its heads' status, and why
    unassessed: ClassVar[tuple[str, str]] = ("estimated", "this kind of search keeps no per-document scores")

    def __repr__(self) -> str:
        return f"<kind {self.name}>"

    def check(self, method) -> None:
        """A method of this kind supplies an algorithm exactly when the kind runs one, and a
        recovery where the kind has none for it."""
        if bool(self.algorithm) != (method.algorithm is not None):
            needs = f"an algorithm: {self.algorithm}" if self.algorithm else "no algorithm (its recover is all)"
            raise ValueError(f"method {method.name}: a {self.name} method supplies {needs}")
        if method.recover is None:
            raise ValueError(f"method {method.name}: a {self.name} method supplies its recover(inputs, names, "
                             "params, log)")

    def params(self, step: str, search):
        """What ``step`` (one of :attr:`steps`) is told for ``search`` (a
        :class:`~headloc.methods.settings.SearchSpec`)."""
        if step not in self.steps:
            raise ValueError(f"a {self.name} search has no step {step!r}; its steps: {', '.join(self.steps)}")
        return self.steps[step].of(search)

    def least_masks(self, method) -> tuple[int, str]:
        """The fewest masks a budgeted method of this kind spends, and why."""
        raise ValueError(f"a {self.name} method spends no masks")

    def recovery_inputs(self, files: SearchFiles, search, model=()):
        """The files the recovery reads (a :class:`~headloc.methods.steps.RecoverInputs`) of a search
        whose files lie in ``files``; ``model``: the model's files, where nothing else waits for them."""
        raise NotImplementedError

    def drive(self, search, job):
        """The kind's steps in one process, in the rules' order, ``job`` (a
        :class:`headloc.methods.driver.Job`) scoring their masks and holding their files; returns
        what the recovery reads."""
        raise NotImplementedError


def read_result(inputs, names, params, log) -> dict:
    """A one-job search's part of recovery.json (``inputs.result``: a gradient, sequential or guided job's
    output), checked: its ``method`` must be the search's, its ranking and values cover every head
    of the model."""
    from headloc.io import read_json  # numpy: not at registry import

    path = inputs.result
    found = read_json(path)
    method = found.pop("method")
    if method != params.method:
        raise ValueError(f"{path} holds a {method!r} search, expected {params.method!r}")
    if sorted(found["ranking"]) != sorted(names) or sorted(found["coef"]) != sorted(names):
        raise ValueError(f"{path} ranks {len(found['ranking'])} heads, not the model's {len(names)}")
    return found


_KINDS: dict[str, Kind] = {}
# The entry-point group through which an installed package adds methods and kinds: each entry
# point names a module, read as one of headloc.methods' own (its METHODS, its Kind subclasses).
PLUGINS = "headloc.methods"


def plugin_modules() -> list:
    """The modules that installed packages name in the ``headloc.methods`` entry-point group
    (docs/extending.md, "A method or kind of your own"), imported, in the order of their names."""
    from importlib.metadata import entry_points

    found = {}  # by module: one named twice (a package found twice on the path) is read once
    for point in sorted(entry_points(group=PLUGINS), key=lambda point: (point.name, point.value)):
        try:
            found[point.value] = importlib.import_module(point.module)
        except ImportError as error:
            raise ImportError(f"entry point {point.name!r} of group {PLUGINS!r} names module {point.value!r}, "
                              f"which does not import: {error}") from error
    return list(found.values())


def kinds_of(module) -> list[type]:
    """The :class:`Kind` subclasses a module defines (not those it imports)."""
    return [item for item in vars(module).values()
            if isinstance(item, type) and issubclass(item, Kind) and item.__module__ == module.__name__ and item.name]


def registry() -> dict[str, Kind]:
    """Every kind, by name: the one :class:`Kind` subclass of each module of this package, then
    those of the plugins' modules (:func:`plugin_modules`)."""
    if _KINDS:
        return _KINDS
    found: dict[str, Kind] = {}
    own = [importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules([str(Path(__file__).parent)])]
    for module in own + plugin_modules():
        kinds = kinds_of(module)
        if module in own and len(kinds) != 1:
            raise ValueError(f"{module.__name__} defines {len(kinds)} kinds; a module of this package defines one")
        for kind in kinds:
            if kind.name in found:
                raise ValueError(f"method kind {kind.name!r} defined twice (in {module.__name__})")
            found[kind.name] = kind()
    # a plugin's module asks for its kind while it is imported (its Method(kind=...)): that inner
    # call filled the registry first, and its instances are the ones the methods hold
    if not _KINDS:
        _KINDS.update(found)
    return _KINDS


def names() -> list[str]:
    return sorted(registry())


def one_job() -> list[str]:
    """The kinds whose searches run in one job (:class:`headloc.methods.one_job.OneJob`, rule search_job)."""
    return sorted(name for name, kind in registry().items() if kind.rule == "search_job")


def get(name: str) -> Kind:
    """A kind by name; ValueError naming the known ones if there is none."""
    try:
        return registry()[name]
    except KeyError:
        raise ValueError(f"unknown method kind {name!r}; known: {', '.join(names())}") from None
