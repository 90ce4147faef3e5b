"""What the run tells the report: the top k, the main method, the tasks' capabilities, units and
directions, and the figures' model and capability. The workflow passes them to the render rules;
every table's and figure's caption is filled from them, and they say which figures a run can fill
(:meth:`headloc.report.spec.FigureSpec.unfilled`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from headloc.heads import TOP_K


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
        two or more: :meth:`~headloc.report.spec.FigureSpec.unfilled`).

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
