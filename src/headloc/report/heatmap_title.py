"""The heatmap's title and footer: which search it draws, how to read it, and what the search says of
its outlined heads (bootstrap stability, evidence above noise, heads not confirmed alone, warnings),
each fitted to the figure's width (:mod:`headloc.report.text_fit`).

Apart from :mod:`headloc.report.heatmap`, which draws the cells: these lines put the record's verdict
on its heads into words, for the reader to check against the cells.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from headloc.report.text_fit import FILL, fitted, renderer_of, shrink_to_fit

TITLE_SIZE, FOOTER_SIZE = 9, 6  # points


def _title(record: Mapping) -> str:
    n_evals = record.get("n_evals")
    evals = f"{n_evals:,} evaluations" if isinstance(n_evals, (int, np.integer)) else "evaluations: n/a"
    return f"{record['model']} / {record['task']}: {record['method']}\nsearch {record['search']}, {evals}"


def _stability(record: Mapping, chosen: list[str]) -> str:
    """A title line with each outlined head's bootstrap probability of being in the top k
    (``top_k_probability`` of a Lasso search), so the uncertainty is read where the heads are."""
    probability = record.get("top_k_probability")
    if not probability or not chosen:
        return ""
    shares = " ".join(f"{probability[name]:.2f}" if name in probability else "-" for name in chosen)
    return f"\nbootstrap P(in top {len(chosen)}), by rank: {shares}"


def _evidence(record: Mapping, chosen: list[str]) -> str:
    """A title line with the search's evidence (:mod:`headloc.search.evidence`): the outlined heads
    found above the noise, by rank, or "no head found above noise" and why."""
    if "no_head_found" not in record:
        return ""
    found = record.get("found")
    if not found:
        prefix = "" if found is None else "no head found above noise: "
        return f"\n{prefix}{record['no_head_found']}"
    ranks = [str(rank) for rank, name in enumerate(chosen, 1) if name in found]
    return (f"\nfound above noise, by rank: {', '.join(ranks) or 'none of the outlined'}; "
            "hatched: a 95 % interval that holds 0")


def _unconfirmed(record: Mapping, chosen: list[str]) -> str:
    """Title lines for a search that confirms heads alone (``confirmed`` in recovery.json): the
    outlined heads it did not confirm, by rank, and its ``warnings`` (why it stopped short)."""
    confirmed = record.get("confirmed")
    ranks = [] if confirmed is None else [str(rank) for rank, name in enumerate(chosen, 1) if name not in confirmed]
    lines = [f"not confirmed alone (a group's value), by rank: {', '.join(ranks)}"] if ranks else []
    return "".join(f"\n{line}" for line in [*lines, *(f"warning: {w}" for w in record.get("warnings") or [])])


def add_title_and_footer(fig: Figure, record: Mapping, chosen: list[str], gray: bool, footer: str | None) -> None:
    """The title (what, which search, how to read it) and the footer, each fitted to the figure."""
    top = f"; top {len(chosen)} outlined, numbered by rank" if chosen else ""
    title, size = fitted(fig, _title(record) + top + ("; gray: no value" if gray else "") +
                         _stability(record, chosen) + _evidence(record, chosen) + _unconfirmed(record, chosen),
                         TITLE_SIZE)
    shrink_to_fit(fig.suptitle(title, fontsize=size), fig.bbox.width * FILL)
    if footer:
        lines, size = fitted(fig, footer, FOOTER_SIZE)  # broken at its spaces: the path on a line of its own
        text = fig.text(0.0, 0.0, lines, fontsize=size, color="0.4", ha="left", va="bottom")
        shrink_to_fit(text, fig.bbox.width * FILL)
        # the panels' axis labels stay above it (constrained layout leaves a figure's texts out)
        height = text.get_window_extent(renderer_of(fig)).height / fig.bbox.height
        fig.get_layout_engine().set(rect=(0, height, 1, 1 - height))
