"""Render a table DataFrame as Markdown, HTML or CSV text, and a cell as every format shows it.

Markdown, LaTeX and HTML (a small self-contained page, what Snakemake's HTML report shows) are for
reading, so floats are shown to one decimal and missing values as
``-``; CSV is for machines and keeps full precision. LaTeX, which shows cells as the others do but
escapes its own special characters, is :mod:`headloc.report.latex`. Every rendered table carries a
footer naming the rule and script that made it (the caller passes the text). Nothing here writes files.

A table may carry ``df.attrs["note"]``: the report functions set it on a legitimately empty
table to say why it is empty. Markdown, LaTeX and HTML show it in italics under the header row; CSV
stays a plain header line, so machines see an ordinary empty table.

A ``search`` column holds search ids, 30 to 60 characters that name a search's folder. Markdown,
LaTeX and HTML show each as its short label (:func:`headloc.report.labels.search_labels`: the method
and the settings it changes, ``cs_stratified m25``); CSV keeps the full id. Markdown breaks its
title, note and footer at :data:`WIDTH` columns, so that a table as narrow reads in a terminal.
"""

from __future__ import annotations

import html
import math
import numbers
import re
import textwrap

import pandas as pd

from headloc.report.labels import search_labels

MISSING = "-"
WIDTH = 100  # columns a Markdown table's prose lines (title, note, footer) are broken at
# what would open a list, quote, heading or table row at the start of a Markdown line
_BLOCK_START = re.compile(r"([-+*>#|]|\d+[.)])(\s|$)")


def format_cell(value, decimals: int = 1) -> str:
    """One cell as display text: floats rounded, missing values as ``-``, lists comma-joined.

    Parameters
    ----------
    value : object
        The cell value.
    decimals : int, default 1
        Digits after the decimal point for floats.

    Returns
    -------
    str
        The display text; ``-0.0`` is shown as ``0.0``.

    Examples
    --------
    >>> [format_cell(v) for v in (-48.44, float("nan"), -0.04, 5, "BL", ["L1H2", "L3H4"])]
    ['-48.4', '-', '0.0', '5', 'BL', 'L1H2, L3H4']
    """
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    if value is None or value is pd.NA or value is pd.NaT:
        return MISSING
    if isinstance(value, numbers.Integral):
        return str(value)
    if isinstance(value, numbers.Real):
        if math.isnan(value):
            return MISSING
        text = f"{value:.{decimals}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(value)


def is_numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def for_reading(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as Markdown, LaTeX and HTML show it: a ``search`` column's ids as their short labels.

    >>> for_reading(pd.DataFrame({"search": ["cs_stratified_m25of200_p0.05_n20_s0"]}))["search"].tolist()
    ['cs_stratified m25']
    """
    if "search" not in df.columns or df.empty:
        return df
    out = df.copy()
    out["search"] = search_labels(out["search"])
    return out


def wrapped(text: str, width: int = WIDTH) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` characters (a longer word keeps its
    line), none of which starts what Markdown would read as a list, quote, heading or table row.

    >>> wrapped("**Table 2. Change in task score, top 5 heads**", width=30)
    ['**Table 2. Change in task', 'score, top 5 heads**']
    >>> wrapped("a b - c", width=3)  # "- c" alone would open a list
    ['a b - c']
    """
    lines = []
    for line in textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False):
        if lines and _BLOCK_START.match(line):
            lines[-1] += " " + line
        else:
            lines.append(line)
    return lines or [text]


def to_markdown(df: pd.DataFrame, *, title: str, footer: str) -> str:
    """A GitHub pipe table with a bold title line above and the footer line below.

    Parameters
    ----------
    df : DataFrame
        The table; its index is not shown.
    title : str
        Shown as ``**title**`` above the table.
    footer : str
        Provenance line shown below the table, e.g.
        ``"made by rule render_table2 (scripts/render_table.py)"``.

    Returns
    -------
    str
        Markdown text ending in a newline. Numeric columns are right-aligned; search ids show as
        their labels (:func:`for_reading`); the title, note and footer are broken at :data:`WIDTH`.

    Examples
    --------
    >>> df = pd.DataFrame({"task": ["gsm8k"], "delta_task": [-48.44]})
    >>> print(to_markdown(df, title="Table 2", footer="made by rule r (s.py)"))
    **Table 2**
    <BLANKLINE>
    | task | delta_task |
    | --- | ---: |
    | gsm8k | -48.4 |
    <BLANKLINE>
    made by rule r (s.py)
    <BLANKLINE>
    """

    def row(cells) -> str:
        return "| " + " | ".join(str(cell).replace("|", r"\|") for cell in cells) + " |"

    df = for_reading(df)
    align = ["---:" if is_numeric(df[column]) else "---" for column in df.columns]
    body = [row(format_cell(value) for value in values) for values in df.itertuples(index=False)]
    header = [row(df.columns), "| " + " | ".join(align) + " |"]
    note = df.attrs.get("note")
    if note:
        body.append("")
        body += wrapped(f"*{note}*")
    lines = [*wrapped(f"**{title}**"), "", *header, *body, "", *wrapped(footer)]
    return "\n".join(lines) + "\n"


_HTML_STYLE = (
    "body{font-family:system-ui,sans-serif;font-size:13px;margin:12px;color:#222}"
    "h3{font-size:14px;margin:0 0 8px;max-width:60em}"
    "table{border-collapse:collapse}"
    "th,td{padding:2px 8px;border-bottom:1px solid #ddd;white-space:nowrap}"
    "th{background:#f3f3f3;text-align:left;position:sticky;top:0}"
    "td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}"
    "tr:hover td{background:#f8f8ff}"
    "p.note{font-style:italic}p.footer{color:#777;font-size:11px;margin-top:10px}"
)


def to_html(df: pd.DataFrame, *, title: str, footer: str) -> str:
    """The table as a self-contained HTML page: title above, footer below, cells as in Markdown.

    Numeric columns are right-aligned; a note (``df.attrs["note"]``) is shown in italics; every
    text is HTML-escaped.

    Examples
    --------
    >>> df = pd.DataFrame({"task": ["a<b"], "delta_task": [-48.44]})
    >>> page = to_html(df, title="Table 2", footer="made by rule r (s.py)")
    >>> "<h3>Table 2</h3>" in page, "<td>a&lt;b</td>" in page, '<td class="num">-48.4</td>' in page
    (True, True, True)
    """
    df = for_reading(df)
    numeric = [is_numeric(df[column]) for column in df.columns]

    def cell(tag, text, is_number):
        css = ' class="num"' if is_number else ""
        return f"<{tag}{css}>{html.escape(str(text))}</{tag}>"

    head = "".join(cell("th", column, num) for column, num in zip(df.columns, numeric))
    rows = ["<tr>" + "".join(cell("td", format_cell(value), num) for value, num in zip(values, numeric)) + "</tr>"
            for values in df.itertuples(index=False)]
    note = df.attrs.get("note")
    parts = [
        "<!DOCTYPE html>",
        f'<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_HTML_STYLE}</style></head>',
        f"<body><h3>{html.escape(title)}</h3>",
        f"<table><thead><tr>{head}</tr></thead><tbody>",
        *rows,
        "</tbody></table>",
        f'<p class="note">{html.escape(note)}</p>' if note else "",
        f'<p class="footer">{html.escape(footer)}</p>',
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def to_csv(df: pd.DataFrame) -> str:
    """The table as CSV text at full precision (no index), for machines.

    Parameters
    ----------
    df : DataFrame
        The table.

    Returns
    -------
    str
        CSV text with ``\\n`` line endings; missing values are empty fields.

    Examples
    --------
    >>> print(to_csv(pd.DataFrame({"k": [5], "delta_task": [-48.4375]})), end="")
    k,delta_task
    5,-48.4375
    """
    return df.to_csv(index=False, lineterminator="\n")
