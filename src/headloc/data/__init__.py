"""Documents and tasks: the datasets built into headloc (``datasets``, ``paper_data``), the
documents a task scores and how a task YAML finds them (``documents``), and the sandbox that runs
model-written programs for the code tasks (``sandbox``).

The lm-eval task YAMLs themselves live in ``headloc/tasks`` (:data:`TASKS_DIR`), a folder lm-eval
reads, not a Python package; their ``utils.py`` imports this package.
"""

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parents[1] / "tasks"  # headloc's lm-eval task folder
