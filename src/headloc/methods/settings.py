"""Typed settings, each default written once: :class:`SearchSettings` (the config's ``search``
section as a task sees it, with ``validation.top_k`` and every method's options) and
:class:`MethodOptions` (a method's own section, e.g. ``group_testing``: its module declares a
subclass). Both are frozen dataclasses checked when built: a bad value is refused with its key and
what is valid, before any work.

The workflow builds them once from its validated config
(:func:`headloc.workflow.configured.task_settings`: a task's ``search`` keys over the section),
``headloc.locate``, the CLI and
:func:`headloc.methods.driver.drive` from their arguments, so every caller takes its defaults from
here. The config schema's entries for these keys (each key's rule, default and ``doc``) are built
from these classes too (:mod:`headloc.workflow.schema`): config/schema.yaml names none of them.

>>> settings = SearchSettings()
>>> settings.n_masks, settings.alpha, settings.top_k
(100, 'cv', 5)
>>> SearchSettings(sparsity=1.5)
Traceback (most recent call last):
...
ValueError: sparsity: 1.5 is not valid; expected a number in (0, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import ClassVar

from headloc.heads import TOP_K
from headloc.methods.rules import Rule, distinct, integer, method_name, number_in, penalty

# The one default search method: config/schema.yaml's search.methods, config/demo.yaml's,
# headloc.locate's and the command's (tests/unit/test_default_method.py); the one search that
# finds every planted kind of head and greedy's heads on SmolLM2 (docs/results/demo-default.md).
# The paper's is cs_stratified.
DEFAULT_METHOD = "screened_greedy"


def setting(default, rule: Rule, *, key: str | None = None, doc: str = ""):
    """A dataclass field with its default and its rule (:mod:`headloc.methods.rules`); ``key``: its
    config key when it is not in the class's section (``validation.top_k``); ``doc``: what it does,
    as the config's schema says (the schema's entries for these keys are built from the fields:
    :mod:`headloc.workflow.schema`)."""
    return field(default=default, metadata={"rule": rule, "key": key, "doc": " ".join(doc.split())})


class Checked:
    """A frozen dataclass whose fields are :func:`setting` s, checked (and read) when built.
    ``SECTION``: the config section its keys belong to, named in its errors where it helps (a
    method's options); empty for the search keys, which locate and drive take by their own names."""

    SECTION: ClassVar[str] = ""

    def __post_init__(self):
        for item in fields(self):
            rule, value = item.metadata.get("rule"), getattr(self, item.name)
            if rule is None:
                continue
            try:
                valid = rule.valid(value)
            except ValueError as error:  # a rule that names what is valid itself (the method registry)
                raise ValueError(f"{self.key(item.name)}: {error}") from None
            if not valid:
                raise ValueError(f"{self.key(item.name)}: {value!r} is not valid; expected {rule.expected}")
            object.__setattr__(self, item.name, rule.read(value))

    @classmethod
    def key(cls, name: str) -> str:
        """How errors name the field ``name``."""
        return f"{cls.SECTION}.{name}" if cls.SECTION else name

    @classmethod
    def defaults(cls) -> dict:
        """Each key and its default."""
        return {item.name: item.default for item in fields(cls) if item.default is not MISSING}


class MethodOptions(Checked):
    """A method's own options (its config section): a subclass per method with options, declared in
    its module as a frozen dataclass of :func:`setting` fields, named by ``section=``::

        @dataclass(frozen=True)
        class ChgOptions(MethodOptions, section="chg"):
            seeds: int = setting(4, integer(1))
    """

    def __init_subclass__(cls, section: str = "", **kwargs):
        super().__init_subclass__(**kwargs)
        cls.SECTION = section

    @classmethod
    def of(cls, given: Mapping | MethodOptions | None = None) -> MethodOptions:
        """The options from ``given`` (some or all of the keys, over the defaults; or options
        already built); a key the method does not have is refused with the ones it has."""
        if isinstance(given, MethodOptions):
            if type(given) is cls:
                return given
            raise ValueError(f"method {cls.SECTION!r} was given the options of method {given.SECTION!r} "
                             f"({given.as_config()}); expected its own ({', '.join(cls.defaults())}) or a mapping of them")
        given = dict(given or {})
        unknown = [key for key in given if key not in cls.defaults()]
        if unknown:
            known = ", ".join(f"{key} (default {value!r})" for key, value in cls.defaults().items())
            raise ValueError(f"method {cls.SECTION!r} has no option {unknown[0]!r}; its options are {known}")
        return cls(**given)

    def problems(self, top_k: int) -> list[tuple[str, str]]:
        """(option, what is wrong and what is valid) for each option the search would cap or ignore
        with ``top_k`` heads to find (validation.top_k); none by default."""
        return []

    def as_config(self) -> dict:
        """The options as a config section (lists, not tuples)."""
        return {item.name: list(value) if isinstance(value := getattr(self, item.name), tuple) else value
                for item in fields(self)}


@dataclass(frozen=True)
class SearchSettings(Checked):
    """The search keys (config/README.md, section ``search``; ``top_k`` is ``validation.top_k``)
    and each method's options (``options``: method name -> its :class:`MethodOptions`, or a mapping
    read into them; a method left out has its defaults).

    ``n_masks`` is the most masks a search scores: a mask design's size, a sequential search's cap
    (its unablated row included); ``budgets`` are smaller designs cut from the first rows."""

    methods: tuple = setting((DEFAULT_METHOD,), distinct(method_name(), least_items=1), doc="""Search methods,
                             each a module of headloc.methods (docs/methods.md). Default: screened_greedy, the
                             one search that finds every planted kind of head and greedy's heads on SmolLM2
                             (docs/results/demo-default.md); the paper's is cs_stratified.""")
    n_masks: int = setting(100, integer(2), doc="""Number of masked evaluations M of the compressed-sensing
                           methods (paper 100-400); the cap of a sequential search. Noted as ignored for a
                           method that spends no mask budget.""")
    budgets: tuple = setting((), distinct(integer(5)), doc="""Smaller budgets M' < n_masks of the
                             compressed-sensing methods, each recovered from the first M' masks of the n_masks
                             design (nested designs: no extra evaluations), as searches of their own (ids
                             m<M'>of<n_masks>). Empty = only n_masks. Noted as ignored for a method that spends
                             no mask budget.""")
    repeats: int = setting(1, integer(1), doc="""Independent mask designs of each compressed-sensing method
                           (seeds seed, seed + 1, ...; repeat 0 is the main search), for the spread of a random
                           method. Same identification subset.""")
    sparsity: float = setting(0.05, number_in(0, 1), doc="""Fraction of heads ablated per mask, in (0, 1) (paper
                              0.01-0.1).""")
    id_docs: int = setting(100, integer(1), doc="""Size of the seeded identification subset each mask is scored
                           on (paper 100). At least 2 (the config check refuses 1); fewer than 10 are noted.""")
    seed: int = setting(0, integer(0), doc="Seed of the identification subset and the measurement matrix.")
    alpha: float | str = setting("cv", penalty(), doc="""Lasso penalty (relative to M), or "cv" for 5-fold
                                 cross-validation.""")
    chunks: int = setting(4, integer(1), doc="""Scoring jobs per search; each job loads the model once and scores
                          M / chunks masks.""")
    top_k: int = setting(TOP_K, integer(1), key="validation.top_k", doc="""Ablate the top 1..top_k heads
                         cumulatively (paper k = 5); also greedy's rounds.""")
    options: Mapping = field(default_factory=dict)

    def __post_init__(self):
        super().__post_init__()
        from headloc.methods.registry import get

        object.__setattr__(self, "options", {name: get(name).options_of(given) for name, given in self.options.items()})

    def options_of(self, method) -> MethodOptions | None:
        """A method's options (its defaults unless given); None for a method that has none."""
        return method.options_of(self.options.get(method.name))


@dataclass(frozen=True)
class SearchSpec:
    """One search: its method (a :class:`~headloc.methods.Method`), the settings it runs with (its
    own ``n_masks``, ``seed`` and ``sparsity``: a repeat's seed, a budget's masks), the scored
    metric's direction and, for a budget cut from the first rows of a larger design, those rows.
    What each step of its kind is told is read from it (:meth:`headloc.methods.kinds.Kind.params`)."""

    method: object
    settings: SearchSettings
    higher_is_better: bool = True
    nested_rows: int | None = None

    @property
    def options(self) -> MethodOptions | None:
        return self.settings.options_of(self.method)
