"""The paper's tables as DataFrames (Tables 1-10 and the appendix A.1 tuning grid), each with
its :class:`~headloc.report.spec.TableSpec` next to it, collected in :data:`TABLES`.

Every function is pure: DataFrames in, a DataFrame out; writing files is the job of
``scripts/render_table.py``. The input frames are described in :mod:`headloc.report.frames`
and Delta Task and Delta Gen in :mod:`headloc.report.delta`, whose helpers the figures share. Deltas
keep full precision here; rounding happens only in :mod:`headloc.report.formats`.

Empty results. The workflow renders every table even on small runs, so a table whose input is
legitimately empty (no universal heads found, no knowledge tasks configured, no tuning grid)
is returned as an empty frame with the table's columns and an explanatory
``df.attrs["note"]`` (the spec's ``empty_note``), which :func:`~headloc.report.to_markdown`
and :func:`~headloc.report.to_latex` print under the header. Malformed input (missing columns,
missing baselines, a method, model or task that the data does not have) raises ValueError.

Unconfirmed heads. A search that confirms heads by ablating each alone (group testing) may stop
before it confirms its whole top k; the tables that list or validate top heads (2, 3, 4, 9, 10)
read the recoveries too and show such heads (:func:`~headloc.report.tables.marks.mark_unconfirmed`): marked in a ``heads``
column, else listed in the note under the table.
"""

from headloc.report.tables.marks import marked
from headloc.report.tables.registry import SPECS
from headloc.report.tables.runs import table1, table2, table3
from headloc.report.tables.searches import greedy_recall, table4, table9, table10
from headloc.report.tables.shared_heads import table5, table7, table8
from headloc.report.tables.sweeps import table6, tuning_table

PAPER_ORDER = ("table1", "table2", "table3", "table4", "table5", "table6", "table7", "table8", "table9",
               "table10", "tuning")
if set(SPECS) != set(PAPER_ORDER):
    raise ImportError(f"the table modules describe {sorted(SPECS)}; PAPER_ORDER lists {sorted(PAPER_ORDER)}")
TABLES = {name: marked(SPECS[name]) for name in PAPER_ORDER}
"""Every paper table by name, in paper order (appendix last), each built next to its spec."""

__all__ = ["TABLES", "greedy_recall", "table1", "table2", "table3", "table4", "table5", "table6", "table7",
           "table8", "table9", "table10", "tuning_table"]
