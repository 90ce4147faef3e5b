"""A table as a LaTeX ``table`` environment with booktabs rules, for a paper.

Cells read as in Markdown and HTML (:mod:`headloc.report.formats`: one decimal, ``-`` for a missing
value, search ids as their labels); what LaTeX alone needs is the escaping of its special characters
in every text (:func:`escape_latex`), so it has a module of its own.
"""

from __future__ import annotations

import pandas as pd

from headloc.report.formats import format_cell, for_reading, is_numeric

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def escape_latex(text: str) -> str:
    r"""Escape LaTeX's special characters (``\ & % $ # _ { } ~ ^``) in plain text.

    Examples
    --------
    >>> print(escape_latex("cs_stratified 5% & more"))
    cs\_stratified 5\% \& more
    """
    return "".join(_LATEX_SPECIAL.get(char, char) for char in str(text))


def to_latex(df: pd.DataFrame, *, caption: str, footer: str, label: str | None = None) -> str:
    r"""A complete LaTeX ``table`` environment with booktabs rules (``\usepackage{booktabs}``).

    Parameters
    ----------
    df : DataFrame
        The table; its index is not shown.
    caption : str
        Plain-text caption, placed above the table as in the paper; special characters are
        escaped, so it cannot carry LaTeX markup.
    footer : str
        Provenance note, set in ``\footnotesize`` below the tabular.
    label : str, optional
        ``\label`` for cross references.

    Returns
    -------
    str
        LaTeX text ending in a newline. Cells and headers are escaped; numeric columns are
        right-aligned; floats show one decimal and missing values ``-``.

    Examples
    --------
    >>> df = pd.DataFrame({"method": ["cs_stratified"], "delta_task": [-48.44]})
    >>> print(to_latex(df, caption="Table 2", footer="made by rule r (s.py)"))
    \begin{table}[htbp]
    \centering
    \caption{Table 2}
    \begin{tabular}{lr}
    \toprule
    method & delta\_task \\
    \midrule
    cs\_stratified & -48.4 \\
    \bottomrule
    \end{tabular}
    \par\smallskip{\footnotesize made by rule r (s.py)}
    \end{table}
    <BLANKLINE>
    """

    def row(cells) -> str:
        return " & ".join(escape_latex(cell) for cell in cells) + r" \\"

    df = for_reading(df)
    spec = "".join("r" if is_numeric(df[column]) else "l" for column in df.columns)
    body = [row(format_cell(value) for value in values) for values in df.itertuples(index=False)]
    lines = [r"\begin{table}[htbp]", r"\centering", rf"\caption{{{escape_latex(caption)}}}"]
    if label:
        lines.append(rf"\label{{{label}}}")
    if df.attrs.get("note"):
        width, text = max(len(df.columns), 1), escape_latex(df.attrs["note"])
        body.append(rf"\multicolumn{{{width}}}{{l}}{{\emph{{{text}}}}} \\")
    spec = spec or "l"
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", row(df.columns), r"\midrule", *body]
    note = rf"\par\smallskip{{\footnotesize {escape_latex(footer)}}}"
    lines += [r"\bottomrule", r"\end{tabular}", note, r"\end{table}"]
    return "\n".join(lines) + "\n"
