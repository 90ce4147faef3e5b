"""Every fenced shell and Python block of the how-to pages (README.md, docs/*.md; docs/results/ holds
measurements with their commands) runs as written, or says why not; what a page shows a block
printing is what it prints.

- Every fenced block names its language. ```bash and ```python blocks are code; the others (text,
  yaml, jsonl, ...) are shown, never run (a file block of docs/own-task.md is written by its test).
- A code block runs here unless the line just above it says ``<!-- not run: REASON -->``, or it lies
  in a section or on a page that another test runs as written (RUN_ELSEWHERE).
- A shell block runs with bash in the checkout, the checkout's .venv/bin first on PATH, as written,
  except that ``make`` prints its recipes (``make -n``), ``snakemake`` is a dry run (``-n``, in a
  temporary ``--directory``; one that succeeded is replayed for the same command and environment),
  and ``python -m headloc locate`` gets the documented switch ``HEADLOC_LOCATE_ARGS`` (2 documents,
  top 1, its output and converted models in temporary folders).
- A Python block runs in a fresh namespace, in a temporary folder.
- A ```text block right after a block that runs is its output: each of its lines is a line of what
  the block printed, in order, unless the line above it says ``<!-- output not compared: REASON -->``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
CODE = {"bash", "python"}
SHOWN = {"text", "yaml", "jsonl", "json", "toml"}
# what another test runs as written: a page, or a section between <!-- name --> and <!-- /name -->
RUN_ELSEWHERE = {
    "docs/own-task.md": "tests/workflow/test_own_task.py",
    "embedded-model": "tests/integration/test_locate.py",
    "walkthrough": "tests/integration/test_locate.py",
}
QUICK = "--documents 2 --top-k 1"  # HEADLOC_LOCATE_ARGS of the documented commands here
FENCE = re.compile(r"^( *)```(\S*)(?: (\S+))?\n(.*?)^\1```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*\Z")
NOT_COMPARED = re.compile(r"<!-- output not compared: (.+?) -->\s*\Z")


@dataclass
class Block:
    page: str
    line: int
    language: str
    path: str | None
    body: str
    not_run: str | None = None  # the reason
    elsewhere: str | None = None  # the test that runs it
    output: "Block | None" = None  # the text block after it
    not_compared: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(text: str, page: str) -> list[Block]:
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()]
        line = before.count("\n") + 1
        block = Block(page, line, match[2], match[3], match[4])
        above = before.rstrip().rsplit("\n", 1)[-1]
        if reason := NOT_RUN.search(above):
            block.not_run = reason[1]
        if reason := NOT_COMPARED.search(above):
            block.not_compared = reason[1]
        sections = [name for name in RUN_ELSEWHERE if "/" not in name and
                    before.count(f"<!-- {name} -->") > before.count(f"<!-- /{name} -->")]
        block.elsewhere = RUN_ELSEWHERE.get(page) or (RUN_ELSEWHERE[sections[0]] if sections else None)
        if found and found[-1].language in CODE and block.language == "text" and \
                not text[found[-1].end:match.start()].replace(above, "").strip():
            found[-1].output = block
        block.end = match.end()
        found.append(block)
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks_of(page.read_text(), page.relative_to(REPO).as_posix())]


BLOCKS = all_blocks()
RUN_HERE = [b for b in BLOCKS if b.language in CODE and not b.not_run and not b.elsewhere]


def test_every_block_names_its_language():
    bare = [b.id for b in BLOCKS if b.language not in CODE | SHOWN]
    assert bare == [], f"fenced blocks without a known language (bash, python, or one that is shown: {SHOWN}): {bare}"


def test_toml_blocks_are_pyproject_entry_points_of_the_plugin_group():
    """A TOML block (docs/extending.md's) parses, and names the entry-point group the registries read."""
    import tomllib

    from headloc.methods.kinds import PLUGINS

    blocks = [b for b in BLOCKS if b.language == "toml"]
    assert blocks
    for block in blocks:
        points = tomllib.loads(block.body)["project"]["entry-points"]
        assert list(points) == [PLUGINS], block.id


def test_commands_are_code_blocks():
    """A command shown with a prompt in a text block would never run."""
    prompts = [b.id for b in BLOCKS if b.language == "text" and re.match(r"\s*\$ ", b.body)]
    assert prompts == [], f"text blocks holding a '$ ' command (make it a ```bash block, its output a ```text one): {prompts}"


def test_every_block_not_run_says_why():
    vague = [b.id for b in BLOCKS if b.not_run is not None and len(b.not_run.split()) < 3]
    assert vague == [], f"'not run' needs a reason of a few words: {vague}"
    shown = [b.id for b in BLOCKS if b.not_run and b.language not in CODE]
    assert shown == [], f"'not run' on a block that is never run: {shown}"


def test_what_runs_elsewhere_is_run_there():
    for name, test in RUN_ELSEWHERE.items():
        text = (REPO / test).read_text()
        assert (Path(name).name if "/" in name else f"<!-- {name} -->") in text, f"{test} does not run {name}"
        if "/" not in name:
            assert any(f"<!-- {name} -->" in page.read_text() for page in PAGES), f"no page has section {name}"


def test_the_parser_sees_markers_and_outputs():
    page = ("```bash\necho hi\n```\n\n```text\nhi\n```\n\n<!-- not run: it needs a GPU here -->\n```python\nx\n```\n"
            "<!-- embedded-model -->\n```python\ny\n```\n<!-- /embedded-model -->\n```bash\nz\n```\n"
            "  ```text\nindented\n  ```\n")
    first, output, gpu, embedded, last, indented = blocks_of(page, "p.md")
    assert first.output is output and output.body == "hi\n" and gpu.not_run == "it needs a GPU here"
    assert embedded.elsewhere == RUN_ELSEWHERE["embedded-model"] and last.elsewhere is None
    assert last.output is indented and indented.body == "indented\n"


def test_the_pages_run_their_commands():
    """Guards the selection: the README's own commands and the library's CLI run here."""
    ids = {b.page for b in RUN_HERE}
    assert {"README.md", "docs/library.md", "docs/paper-grid.md"} <= ids
    assert any("headloc locate" in b.body for b in RUN_HERE if b.page == "README.md")


def compare(block: Block, printed: str) -> None:
    if block.output is None or block.output.not_compared:
        return
    lines = [" ".join(line.split()) for line in printed.splitlines()]
    at = 0
    for expected in filter(None, (" ".join(line.split()) for line in block.output.body.splitlines())):
        while at < len(lines) and lines[at] != expected:
            at += 1
        assert at < len(lines), (f"{block.output.id}: the page shows {expected!r}, which {block.id} does not print "
                                 f"(in this order); it printed:\n{printed[-3000:]}")
        at += 1


# A dry run the pages show twice (the README repeats docs/paper-grid.md's) runs once per module:
# the same arguments and environment in the same checkout, from an empty --directory, print the
# same plan (no block writes into the checkout: make and snakemake are dry runs, locate writes to
# temporary folders); a paper-grid dry run takes about 15 s. Only a run that succeeded is replayed.
SHELL = """
set -euo pipefail
make() { command make -n "$@"; }
snakemake() {
  local key seen
  key=$({ printf '%s\\0' "$@"; env | grep -v -e '^HEADLOC_DRY_RUN=' -e '^HEADLOC_LOCATE_ARGS=' \\
        -e '^PYTEST_CURRENT_TEST=' -e '^_=' -e '^SHLVL=' | sort; } | sha256sum | cut -c1-32)
  seen="$HEADLOC_DRY_RUNS_SEEN/$key"
  if [[ -f "$seen.ok" ]]; then cat "$seen.out"; cat "$seen.err" >&2; return 0; fi
  command snakemake "$@" -n --directory "$HEADLOC_DRY_RUN" > "$seen.out" 2> "$seen.err" || {
    cat "$seen.out"; cat "$seen.err" >&2; return 1; }
  touch "$seen.ok"; cat "$seen.out"; cat "$seen.err" >&2
}
"""


@pytest.fixture(scope="module")
def dry_runs_seen(tmp_path_factory):
    """Where SHELL's snakemake() keeps the dry runs that succeeded, for the module's blocks."""
    return tmp_path_factory.mktemp("dry-runs-seen")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, smollm2_dir):
    """A --models-dir where the embedded model is converted already (conftest's copy)."""
    folder = tmp_path_factory.mktemp("models")
    (folder / "smollm2-135m-instruct").symlink_to(smollm2_dir)
    return folder


@pytest.mark.parametrize("block", RUN_HERE, ids=lambda b: b.id)
def test_the_block_runs_as_written(block, tmp_path, models_dir, dry_runs_seen, monkeypatch):
    if block.language == "python":
        monkeypatch.chdir(tmp_path)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block.body, f"{block.page}:{block.line}", "exec"), {"__name__": "__doc_block__"})
        compare(block, printed.getvalue())
        return
    (tmp_path / "dry-run").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HEADLOC_DRY_RUN": str(tmp_path / "dry-run"),
           "HEADLOC_DRY_RUNS_SEEN": str(dry_runs_seen),
           "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "HEADLOC_LOCATE_ARGS": f"{QUICK} --out {tmp_path / 'out'} --models-dir {models_dir} --quiet"}
    result = subprocess.run(["bash", "-c", SHELL + block.body], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, f"{block.id} failed:\n{block.body}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    compare(block, result.stdout)


def test_a_dry_run_is_replayed_only_for_the_same_command_and_environment(tmp_path):
    """SHELL's snakemake() runs the real command again for other arguments or another environment,
    and for a command that failed; it replays only a success seen with both the same."""
    bin_dir, seen, calls = tmp_path / "bin", tmp_path / "seen", tmp_path / "calls"
    bin_dir.mkdir(), seen.mkdir()
    stand_in = bin_dir / "snakemake"  # prints its arguments and GPUs; fails for target "broken"
    stand_in.write_text(f'#!/bin/bash\necho "$*" >> {calls}\necho "plan: $1 ${{CUDA_VISIBLE_DEVICES:-all}}"\n'
                        '[[ "$1" != broken ]]\n')
    stand_in.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HEADLOC_DRY_RUNS_SEEN": str(seen),
           "HEADLOC_DRY_RUN": str(tmp_path / "one-dir")}

    def run(line, **more):
        done = subprocess.run(["bash", "-c", SHELL + line], env={**env, **more}, capture_output=True, text=True)
        return done.returncode, done.stdout

    assert run("snakemake all --cores 1") == (0, "plan: all all\n")
    assert run("snakemake all --cores 1", HEADLOC_DRY_RUN=str(tmp_path / "another")) == (0, "plan: all all\n")
    assert run("snakemake table4 --cores 1") == (0, "plan: table4 all\n")
    assert run("CUDA_VISIBLE_DEVICES=2,3 snakemake all --cores 1") == (0, "plan: all 2,3\n")
    assert run("snakemake broken")[0] == 1 and run("snakemake broken")[0] == 1
    real = ["all --cores 1", "table4 --cores 1", "all --cores 1", "broken", "broken"]  # the GPUs' run third
    assert calls.read_text().splitlines() == [f"{args} -n --directory {tmp_path / 'one-dir'}" for args in real]
