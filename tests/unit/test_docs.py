"""The manual stays a manual: the how-to pages keep their length, config/README.md's cells stay
short, no page carries an issue or stop number, dates live only in docs/results/ (where each study
says when it ran), every relative link and anchor resolves, and every page is reachable."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
RESULTS = DOCS / "results"
PAGES = sorted(DOCS.rglob("*.md")) + [REPO / "README.md", REPO / "config" / "README.md"]
LINES = {"docs/demo.md": 80, "docs/methods.md": 250, "README.md": 90}
CELL = 400  # characters in one cell of config/README.md's tables

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\]\n]|\][^(\n])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
NUMBERED = re.compile(r"\b(?:issue|stop)s? \d+|#\d+(?![\w-])", re.I)  # not an anchor like #2-the-task
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def prose(text: str) -> str:
    """The text outside fenced blocks and inline code (where a link or heading is not one)."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces as hyphens.

    >>> slug("On a GPU (`benchmarks/gpu_check.py`)")
    'on-a-gpu-benchmarksgpu_checkpy'
    >>> slug("Delta Task and Delta Gen: negative is always worse")
    'delta-task-and-delta-gen-negative-is-always-worse'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on a page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        heading = re.match(r"#{1,6} +(.*?)#*\s*$", line)
        if heading:
            base = slug(heading[1])
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links_of(text: str) -> list[str]:
    """The targets of the Markdown links and images in ``text`` that point inside the repository."""
    return [t for t in LINK.findall(prose(text)) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def relative_links(page: Path) -> list[str]:
    return relative_links_of(page.read_text())


def broken(page: Path, target: str) -> str | None:
    """Why ``target`` (a link on ``page``) does not resolve, or None when it does."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return f"{name(page)}: link {target!r}: no file {file}"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"{name(page)}: link {target!r}: {name(file)} has no heading with anchor #{anchor}"
    return None


def cells(line: str) -> list[str]:
    """A Markdown table row's cells (an escaped \\| stays inside its cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


@pytest.mark.parametrize("page, most", sorted(LINES.items()))
def test_how_to_pages_keep_their_length(page, most):
    lines = len((REPO / page).read_text().splitlines())
    assert lines <= most, f"{page} has {lines} lines, at most {most}: move measurements to docs/results/"


def test_config_readme_cells_are_short():
    long = [f"line {i}: {len(cell)} characters in {cells(line)[0]}"
            for i, line in enumerate((REPO / "config/README.md").read_text().splitlines(), 1)
            if line.startswith("|") for cell in cells(line) if len(cell) > CELL]
    assert long == [], f"config/README.md cells over {CELL} characters (link a docs page instead): {long}"


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_no_issue_or_stop_numbers(page):
    found = [f"line {i}: {m[0]!r}" for i, line in enumerate(page.read_text().splitlines(), 1)
             for m in NUMBERED.finditer(line)]
    assert found == [], f"{name(page)} names issues or stops (a manual explains, it does not cite tickets): {found}"


@pytest.mark.parametrize("page", [p for p in PAGES if RESULTS not in p.parents], ids=name)
def test_dates_only_in_results(page):
    found = [f"line {i}: {m[0]}" for i, line in enumerate(page.read_text().splitlines(), 1)
             for m in DATE.finditer(line)]
    assert found == [], f"{name(page)} has dates (a study's date belongs in docs/results/): {found}"


@pytest.mark.parametrize("page", [p for p in sorted(RESULTS.glob("*.md")) if p.name != "README.md"], ids=name)
def test_each_study_opens_with_its_date_and_command(page):
    opening = re.split(r"^## ", FENCE.sub("```", page.read_text()), maxsplit=1, flags=re.M)[0]
    assert DATE.search(opening), f"{name(page)}: no date (YYYY-MM-DD) before its first section"
    assert "```" in opening, f"{name(page)}: no command block before its first section"


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_relative_link_resolves(page):
    problems = [why for target in relative_links(page) if (why := broken(page, target))]
    assert problems == [], "\n".join(problems)


def test_the_link_check_sees_the_links():
    """Guards the checker itself: it finds the pages' links, skips code, and reports bad targets."""
    assert sum(len(relative_links(page)) for page in PAGES) >= 100
    page = REPO / "README.md"
    assert broken(page, "docs/no-such-page.md") and broken(page, "docs/demo.md#no-such-heading")
    assert broken(page, "docs/demo.md") is None
    assert relative_links_of("see [a](x.md), `[b](y.md)`, ![c](img/z.png) and [d](https://e.org)") == [
        "x.md", "img/z.png"]


def test_the_other_checks_see_what_they_look_for(tmp_path):
    """Guards the helpers: repeated headings get GitHub's suffixes, an escaped pipe stays in its
    cell, a ticket number is found but an anchor that starts with a digit is not, dates are found."""
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## Runs\n\n```\n## not a heading\n```\n\n## Runs\n")
    assert anchors(page) == {"top", "runs", "runs-1"}
    assert cells("| `key` | a \\| b | c |") == ["`key`", "a \\| b", "c"]
    assert [m[0] for m in NUMBERED.finditer("see issue 31, stops 28 and #35; [x](a.md#2-the-task)")] == [
        "issue 31", "stops 28", "#35"]
    assert DATE.findall("run on 2026-11-26, commit 4ddd677") == ["2026-11-26"]


def test_every_docs_page_is_linked_from_another():
    linked = {(page.parent / target.partition("#")[0]).resolve()
              for page in PAGES for target in relative_links(page) if target.partition("#")[0]}
    orphans = [name(page) for page in sorted(DOCS.rglob("*.md")) if page.resolve() not in linked]
    assert orphans == [], f"pages no other page links to: {orphans}"


MEASURED = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)(?:\s?-\s?(\d[\d,]*(?:\.\d+)?))?\s?(?:%|min\b|evaluations\b)")
RESULTS_LINK = re.compile(r"\]\(((?:\.\./)*(?:docs/)?results/[\w.-]+\.md)(?:#[^)]*)?\)")


def sentences(text: str) -> list[str]:
    """The prose's sentences (a paragraph, a list item or a table row split at '. ' before a capital)."""
    found = []
    for paragraph in re.split(r"\n\s*\n|\n(?=\s*[-*] |\|)", FENCE.sub("", text)):
        found += re.split(r"(?<=[.!?])\s+(?=[A-Z*(`])", " ".join(paragraph.split()))
    return found


def linking_sentences(page: Path):
    """Each sentence of ``page`` that links docs/results pages: the sentence, its prose without
    inline code, the linked pages' names and their text (whitespace made single spaces, so a value
    broken across lines is held whole)."""
    for sentence in sentences(page.read_text()):
        linked = [(page.parent / target).resolve() for target in RESULTS_LINK.findall(sentence)]
        if linked:
            held = " ".join(" ".join(target.read_text().split()) for target in linked if target.is_file())
            yield sentence, CODE.sub("", sentence), [t.name for t in linked], held


def unquoted_numbers(page: Path) -> list[str]:
    """Numbers with a unit of a measurement (%, min, evaluations) in a sentence of ``page`` that links
    a docs/results page, which none of the linked pages holds."""
    problems = []
    for sentence, prose, names, held in linking_sentences(page):
        for match in MEASURED.finditer(prose):
            for number in filter(None, match.groups()):
                if not re.search(rf"(?<![\d.,]){re.escape(number)}(?![\d,]|\.\d)", held):
                    problems.append(f"{number} ({match[0]!r}) is not on {names}: {sentence[:120]!r}")
    return problems


@pytest.mark.parametrize("page", [p for p in PAGES if RESULTS not in p.parents], ids=name)
def test_measured_numbers_come_from_the_linked_results_page(page):
    problems = unquoted_numbers(page)
    assert problems == [], f"{name(page)} quotes numbers its results pages do not hold:\n" + "\n".join(problems)


def test_the_number_check_sees_numbers(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.md").write_text("greedy: 98.7 % in 64 evaluations, 6 min 59 s; 1,341 masks\n")
    page = tmp_path / "page.md"
    page.write_text("It reaches 98.7-99.5 % with 64 evaluations ([x](results/x.md)). Elsewhere 12 % (no link).\n\n"
                    "- 7 min, 1,341 evaluations: [x](results/x.md)\n")
    assert [p.split(" ")[0] for p in unquoted_numbers(page)] == ["99.5", "7"]


DURATION = re.compile(r"(?<![\d.,])\d+ min \d+ s\b")


def unquoted_durations(page: Path) -> list[str]:
    """Durations written ``<m> min <s> s`` in a sentence of ``page`` that links a docs/results page,
    which none of the linked pages holds whole (the number check above reads only their minutes)."""
    return [f"{duration!r} is not on {names}: {sentence[:120]!r}"
            for sentence, prose, names, held in linking_sentences(page)
            for duration in DURATION.findall(prose) if duration not in held]


@pytest.mark.parametrize("page", [p for p in PAGES if RESULTS not in p.parents], ids=name)
def test_measured_durations_come_from_the_linked_results_page(page):
    problems = unquoted_durations(page)
    assert problems == [], f"{name(page)} quotes durations its results pages do not hold:\n" + "\n".join(problems)


def test_the_duration_check_sees_durations(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.md").write_text("make demo 11 min\n19 s; 12 min 40 s\n")
    page = tmp_path / "page.md"
    page.write_text("It took 11 min 19 s and 12 min 41 s ([x](results/x.md)). Elsewhere 3 min 2 s (no link).\n")
    assert [p.split(" is ")[0] for p in unquoted_durations(page)] == ["'12 min 41 s'"]


def test_the_checks_leave_inline_code_alone(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.md").write_text("nothing measured\n")
    page = tmp_path / "page.md"
    page.write_text("Run `bench --budget 67 % --wait 3 min 5 s` ([x](results/x.md)).\n")
    assert unquoted_numbers(page) == [] and unquoted_durations(page) == []


CODE_FILES = [path for folder in ("src", "scripts", "benchmarks", "rules", "tools") for path in sorted((REPO / folder).rglob("*"))
        if path.suffix in (".py", ".smk", ".sh", ".yaml")] + [REPO / "Snakefile"]


@pytest.mark.parametrize("path", CODE_FILES, ids=name)
def test_no_code_cites_an_issue_or_stop(path):
    """A comment or docstring says why, and points at a page of docs/ for more, not at a ticket."""
    found = [f"line {i}: {m[0]!r}" for i, line in enumerate(path.read_text().splitlines(), 1)
             for m in re.finditer(r"\b(?:issue|stop)s? \d+", line, re.I)]
    assert found == [], f"{name(path)} cites issues or stops: {found}"

