"""What the run tells the report, and the declarative description of one table or figure.

Each paper table and figure is described once, next to its builder, by a :class:`TableSpec` or
:class:`FigureSpec`: its name, one line on what it shows, the collected tables it reads, its
columns, the note it carries when legitimately empty, its caption and how it is built. The
registries :data:`headloc.report.TABLES` and :data:`headloc.report.FIGURES` collect them; the
workflow's rules, the render scripts and the README's target table all read these.

The collected tables a spec may read (``inputs``) are those of the registry
:data:`headloc.collected.COLLECTIONS`: ``"models"``, ``"recoveries"``, ``"tuning"`` and
``"evals_<scope>"`` for the evaluations of one scope (``"evals_main"``, ``"evals_methods"``, ...).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from headloc.collected import COLLECTIONS
from headloc.heads import TOP_K

if TYPE_CHECKING:  # annotations only: the Snakefile and the table jobs read the specs without matplotlib
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class ReportOptions:
    """What the run tells the report (the workflow passes these as the render rules' params).

    Lists are accepted wherever a tuple is declared and stored as tuples; ``None`` for a
    sequence of knowledge tasks, or for ``capabilities``, means none.

    Attributes
    ----------
    top_k : int
        Heads ablated per search in Tables 2-4 and Figure 1, listed in Tables 9-10.
    gen_tasks : tuple of str, optional
        The eval tasks averaged into Delta Gen; None: every eval task other than the run's own.
    method : str, optional
        The main search method (Tables 2, 3, 6, 10, Figures 1, 2, 4); None: every method.
    capabilities : mapping of str to str
        Task -> capability, in config order.
    knowledge_tasks : tuple of str
        The searched knowledge tasks (Figure 4).
    knowledge_eval_tasks : tuple of str
        The knowledge multiple-choice eval tasks (Table 8, Figure 3).
    figure_model, figure_capability : str, optional
        The model and capability Figures 1, 2 (model also 4) show; None: the first searched.
    units : mapping of str to (str, str)
        Task -> (display unit, metric), :meth:`headloc.workflow.plan.Plan.report_options`.
    directions : mapping of str to bool
        Task -> whether its metric is higher-is-better; the captions name the lower-is-better
        tasks, whose changes enter every delta with their sign flipped.
    methods : tuple of str
        Every search method the run searches with, in config order (the methods figure compares
        two or more: :meth:`FigureSpec.unfilled`).

    Examples
    --------
    >>> options = ReportOptions(top_k=3, gen_tasks=["boolq", "mmlu"], knowledge_tasks=None)
    >>> options.gen_tasks, options.knowledge_tasks
    (('boolq', 'mmlu'), ())
    """

    top_k: int = TOP_K
    gen_tasks: tuple[str, ...] | None = None
    method: str | None = None
    capabilities: Mapping[str, str] = field(default_factory=dict)
    knowledge_tasks: tuple[str, ...] = ()
    knowledge_eval_tasks: tuple[str, ...] = ()
    figure_model: str | None = None
    figure_capability: str | None = None
    units: Mapping[str, Sequence[str]] = field(default_factory=dict)
    directions: Mapping[str, bool] = field(default_factory=dict)
    methods: tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, numbers.Integral) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0, got {self.top_k!r}")
        for name in ("gen_tasks", "knowledge_tasks", "knowledge_eval_tasks", "methods"):
            value = getattr(self, name)
            if value is None:
                value = None if name == "gen_tasks" else ()
            elif isinstance(value, str):
                raise ValueError(f"{name} must be a list of task names, got the string {value!r}")
            else:
                value = tuple(value)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "capabilities", dict(self.capabilities or {}))
        bad = {task: value for task, value in (self.directions or {}).items() if not isinstance(value, bool)}
        if bad:
            raise ValueError(f"directions must map each task to True or False (higher is better), got {bad!r}")
        object.__setattr__(self, "directions", dict(self.directions or {}))

    def unit_note(self) -> str:
        """What a caption adds for tasks not shown in percent (:func:`headloc.data.units.display_score`).

        >>> ReportOptions(units={"ioi": ["points", "acc"], "wiki": ["own", "word_perplexity,none"],
        ...                      "swear": ["relative", "profane_words"]}).unit_note()
        '; not in percentage points: wiki in its own unit (word_perplexity,none), swear in percent of its unablated score'
        """
        words = {"own": "in its own unit ({metric})", "relative": "in percent of its unablated score"}
        other = [f"{task} {words[unit].format(metric=metric)}" for task, (unit, metric) in self.units.items()
                 if unit != "points"]
        return f"; not in percentage points: {', '.join(other)}" if other else ""

    def delta_note(self) -> str:
        """How a delta reads: negative is worse, and how each task's change enters (its metric, its
        unit, and "lower is better: sign flipped" for a lower-is-better metric); empty without units
        (no run told them).

        >>> ReportOptions(units={"arc": ["points", "acc"], "swear": ["relative", "profane_words"]},
        ...               directions={"arc": True, "swear": False}).delta_note()
        'negative = worse, each task entering as arc (acc, percentage points), swear (profane_words, % of unablated, lower is better: sign flipped)'
        """
        words = {"points": "percentage points", "relative": "% of unablated", "own": "own unit"}
        terms = [f"{task} ({metric}, {words[unit]}"
                 f"{', lower is better: sign flipped' if self.directions.get(task) is False else ''})"
                 for task, (unit, metric) in self.units.items()]
        return f"negative = worse, each task entering as {', '.join(terms)}" if terms else ""

    def caption_fields(self) -> dict[str, object]:
        """The values a caption template may name: ``{k}``, ``{gen}``, ``{main}`` and ``{unit}``
        (percentage points, else each task's unit, which :meth:`delta_note` names).

        >>> ReportOptions(top_k=3, method="cs_stratified").caption_fields()
        {'k': 3, 'gen': 'the other tasks', 'main': 'method cs_stratified', 'unit': 'percentage points'}
        >>> ReportOptions(units={"ll": ["own", "loglik,none"]}).caption_fields()["unit"]
        "in each task's unit"
        >>> ReportOptions(gen_tasks=[]).caption_fields()["gen"]  # e.g. every other task in its own unit
        'no task'
        """
        points = all(unit == "points" for unit, _ in self.units.values())
        return {"k": self.top_k,
                "gen": "the other tasks" if self.gen_tasks is None else ", ".join(self.gen_tasks) or "no task",
                "main": f"method {self.method}" if self.method else "every method",
                "unit": "percentage points" if points else "in each task's unit"}


def _given(name: str, inputs: tuple[str, ...], frames: Mapping[str, pd.DataFrame]) -> list:
    """The frames of ``inputs`` in their order; ValueError naming any that ``frames`` lacks."""
    missing = [key for key in inputs if key not in frames]
    if missing:
        raise ValueError(
            f"{name} needs input(s) {', '.join(map(repr, missing))} (it reads "
            f"{', '.join(inputs)}); given: {', '.join(map(str, frames)) or 'nothing'}"
        )
    return [frames[key] for key in inputs]


def _check_inputs(name: str, inputs: tuple[str, ...]) -> None:
    unknown = [key for key in inputs if key not in COLLECTIONS]
    if unknown or not inputs:
        raise ValueError(f"{name}: inputs must be among {', '.join(COLLECTIONS)}; got "
                         f"{', '.join(inputs) or 'none'}")


@dataclass(frozen=True)
class TableSpec:
    """One paper table: what it shows, what it reads, its columns, caption and builder.

    Attributes
    ----------
    name : str
        Its file stem, ``"table2"`` (``results/tables/table2.md``).
    about : str
        One line on what it shows (the rule's message, the README's target table).
    inputs : tuple of str
        The collected tables it reads (:data:`headloc.collected.COLLECTIONS`), in the order
        ``builder`` takes them.
    columns : tuple of str
        Its columns; a name in braces stands for one column per value (``delta_{capability}``:
        ``delta_math``, ``delta_code``, ...).
    empty_note : str
        The note (``attrs["note"]``) it carries when its input is legitimately empty.
    caption : str
        The caption template; ``{k}``, ``{gen}`` and ``{main}`` are filled by :meth:`title`.
    builder : callable
        ``builder(*frames, options) -> DataFrame``, the frames in ``inputs`` order.
    deltas : bool
        Whether its numbers are changes against the unablated model (Delta Task, Delta Gen, a
        head's Delta per task); the report's caption then says how to read a delta.
    """

    name: str
    about: str
    inputs: tuple[str, ...]
    columns: tuple[str, ...]
    empty_note: str
    caption: str = field(repr=False)
    builder: Callable[..., pd.DataFrame] = field(repr=False, compare=False)
    deltas: bool = False

    def __post_init__(self):
        _check_inputs(self.name, self.inputs)

    def title(self, options: ReportOptions) -> str:
        """The caption for this run (Markdown title line, LaTeX caption), saying which tasks' scores
        are not in percent, and for a table of deltas how each task's change enters them."""
        caption = self.caption.format(**options.caption_fields())
        if self.deltas and options.delta_note():
            return f"{caption}; {options.delta_note()}"  # it names every task's unit too
        return caption + options.unit_note()

    def build(self, frames: Mapping[str, pd.DataFrame], options: ReportOptions) -> pd.DataFrame:
        """The table from the collected frames keyed by input name (others are ignored).

        Raises ValueError naming each input of :attr:`inputs` that ``frames`` lacks, and
        whatever the builder raises on malformed input.
        """
        return self.builder(*_given(self.name, self.inputs, frames), options)


@dataclass(frozen=True)
class FigureSpec:
    """One paper figure: as :class:`TableSpec` without columns; the builder makes a Figure.

    ``builder(*frames, options, footer) -> Figure``, the frames in ``inputs`` order; ``footer``
    is the provenance line (None: no footer). ``caption`` is the figure's title (shown on a
    "no data" figure). ``needs(options) -> str | None`` says what a run's config lacks for the
    figure to have anything to plot (None: nothing), see :meth:`unfilled`.
    """

    name: str
    about: str
    inputs: tuple[str, ...]
    empty_note: str
    caption: str = field(repr=False)
    builder: Callable[..., Figure] = field(repr=False, compare=False)
    needs: Callable[[ReportOptions], str | None] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        _check_inputs(self.name, self.inputs)

    def title(self, options: ReportOptions) -> str:
        """The figure's title for this run, saying which tasks' scores are not in percent."""
        return self.caption.format(**options.caption_fields()) + options.unit_note()

    def unfilled(self, options: ReportOptions) -> str | None:
        """Why a run told ``options`` cannot fill this figure, naming the config keys it lacks; None
        when it can. The workflow leaves such a figure out of ``all`` and refuses it by name with
        this reason (a run that could fill it but found nothing still draws a "no data" figure).

        >>> from headloc.report import FIGURES
        >>> FIGURES["fig1"].unfilled(ReportOptions()) is None
        True
        >>> print(FIGURES["methods"].unfilled(ReportOptions(methods=["guided_greedy"])))
        it compares search methods and this config searches with one, guided_greedy (search.methods): list two or more
        """
        return self.needs(options) if self.needs else None

    def build(
        self,
        frames: Mapping[str, pd.DataFrame],
        options: ReportOptions,
        footer: str | None = None,
    ) -> Figure:
        """The figure from the collected frames keyed by input name (as :meth:`TableSpec.build`)."""
        return self.builder(*_given(self.name, self.inputs, frames), options, footer)
