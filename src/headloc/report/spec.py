"""The declarative description of one table or figure; what the run tells the report
(:class:`~headloc.report.options.ReportOptions`) fills in its caption.

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from headloc.collected import COLLECTIONS
from headloc.report.options import ReportOptions

if TYPE_CHECKING:  # annotations only: the Snakefile and the table jobs read the specs without matplotlib
    from matplotlib.figure import Figure


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
