"""The package layout holds: every import between headloc's modules (read with ``ast``, imports
inside functions included) goes down the layers headloc/__init__.py describes, and none goes round
in a circle."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
# headloc/__init__.py's order: a part may import itself and the parts before it, never one after.
LAYERS = [("heads", "io", "collected"), ("model",), ("data", "tasks"), ("engine",), ("search",), ("methods",),
          ("report",), ("workflow",), ("groundtruth",), ("api", "__main__"), ("benchmarks",)]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The headloc modules a file imports (``from headloc.x import y`` counts y when it is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("headloc")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("headloc"):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (SRC / "headloc").rglob("*.py") if "tasks/data" not in str(p)}
    return {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else "(package)"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), i.e. the import circles."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    return found


GRAPH = graph()


def test_the_graph_sees_the_imports_it_must():
    assert "headloc.engine.lm" in GRAPH["headloc.engine.grouped"]
    assert "headloc.methods.contract" in GRAPH["headloc.methods"]
    assert "headloc.collected" in GRAPH["headloc.report.spec"]
    assert "headloc.workflow.task_lookup" in GRAPH["headloc.workflow.facts"]


def test_no_import_circles():
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_part_is_a_layer_with_a_package():
    parts = {part(m) for m in GRAPH} - {"(package)"}
    assert parts <= set(RANK), f"parts without a layer: {parts - set(RANK)}"
    for name in set(RANK) - {"heads", "io", "collected", "tasks", "__main__"}:  # modules, not packages
        assert (SRC / "headloc" / name / "__init__.py").is_file(), name
        assert f"``{name}``" in (SRC / "headloc" / "__init__.py").read_text(), f"headloc/__init__.py omits {name}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_only_go_down(module):
    up = [m for m in GRAPH[module] if part(m) in RANK and part(module) in RANK and RANK[part(m)] > RANK[part(module)]]
    assert not up, f"{module} imports {up}, a later layer (headloc/__init__.py)"


def test_no_module_imports_the_package_itself():
    """``import headloc`` then ``headloc.methods`` or ``headloc.locate`` reaches any part, above or
    below, out of the layers' sight: a module names the part it imports."""
    bare = sorted(module_name(path) for path in (SRC / "headloc").rglob("*.py")
                  if any(isinstance(node, ast.Import) and any(alias.name == "headloc" for alias in node.names)
                         for node in ast.walk(ast.parse(path.read_text()))))
    assert bare == []


def test_the_report_never_imports_the_workflow():
    """The report draws what it is handed (collected frames, a plan passed in): it knows the collected
    tables by the registry below both (headloc.collected), never by asking the workflow."""
    reaching = {module: sorted(m for m in GRAPH[module] if part(m) == "workflow")
                for module in GRAPH if part(module) == "report"}
    assert {module: found for module, found in reaching.items() if found} == {}
    assert RANK["report"] < RANK["workflow"]


def test_reading_the_registry_imports_nothing_heavy():
    """The Snakefile reads the registry at parse time: no torch, sklearn, lm-eval or pandas for it."""
    import subprocess
    import sys

    code = ("import sys; from headloc import methods, collected; from headloc.workflow import plan, facts, config; "
            "[methods.get(n).label for n in methods.names()]; "
            "print(sorted({'torch', 'sklearn', 'lm_eval', 'transformers', 'pandas', 'matplotlib'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


BENCHMARKS = sorted((SRC.parent / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.name)
def test_a_benchmark_script_is_its_command_line_only(script):
    """A benchmark's logic lives in a tested module (headloc.benchmarks, or the part it measures);
    its script parses the command line and calls it, in at most 60 lines."""
    assert len(script.read_text().splitlines()) <= 60


def test_no_stand_in_objects():
    """Tests and benchmarks hand the code real objects (a dataclass, a tiny model), never a
    SimpleNamespace that takes any attribute the code happens to read."""
    files = [*BENCHMARKS, *sorted((SRC.parent / "tests").rglob("*.py")), *sorted((SRC / "headloc").rglob("*.py"))]
    assert [str(path) for path in files if "SimpleNamespace" in path.read_text() and path != Path(__file__)] == []



MODULE_LINES = 250


def test_modules_stay_short():
    """A module holds one thing a reader can take in whole: at most MODULE_LINES lines (the task
    folders' data files aside)."""
    lengths = {str(path.relative_to(SRC / "headloc")): len(path.read_text().splitlines())
               for path in (SRC / "headloc").rglob("*.py") if "tasks/data" not in str(path)}
    too_long = {name: n for name, n in lengths.items() if n > MODULE_LINES}
    assert too_long == {}, f"modules longer than {MODULE_LINES} lines: {too_long}"
