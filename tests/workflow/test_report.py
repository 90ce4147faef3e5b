"""Snakemake's HTML report of a real run: every table, figure and heatmap in it, with its caption.

One real run of the `all` target on a tiny random Llama (2 layers x 4 heads) with every search
method, then `snakemake --report report.html`. The report is a single page whose results are an
embedded JSON object (`var results = {...};`: path -> name, labels, caption HTML, mime type and the
file as a base64 data URI); the test reads it back and compares it with the run's files and
headloc's own registry of tables and figures.
"""

import base64
import html
import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import snakemake
from headloc.report import FIGURES, TABLES

ID_DOCS, TOP_K = 4, 2
CHG = {"seeds": 2, "lam": 0.1, "steps": 4}
METHODS = ["cs_stratified", "greedy1s", "greedy", "attribution", "chg"]


# a phrase only the heatmap caption of that method says
READING = {"cs_stratified": "stratified: every mask", "greedy1s": "head alone is ablated",
           "greedy": "greedy round it was chosen in", "attribution": "minus d score / d gate",
           "chg": "Causal Head Gating"}


@pytest.fixture(scope="module")
def report_run(tmp_path_factory, tiny_model_dir):
    work = tmp_path_factory.mktemp("report")
    config = {
        "models": {"tiny": {"source": str(tiny_model_dir), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 6}},
        "search": {"methods": METHODS, "n_masks": 6, "sparsity": 0.25, "id_docs": ID_DOCS, "chunks": 1,
                   "alpha": 0.001},
        "chg": CHG,
        "validation": {"top_k": TOP_K},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    common = ("--directory", str(work), "--configfile", str(work / "config.yaml"))
    snakemake("--cores", "2", *common)
    snakemake("--report", str(work / "report.html"), *common)
    return work


def embedded(page: str, name: str):
    """The JSON the report's page assigns to ``var <name>``."""
    match = re.search(rf"\bvar {name} = (\"|\{{)(.*?);\n", page, flags=re.S)
    assert match, f"report has no var {name}"
    return json.loads(match.group(1) + match.group(2))


def text(caption_html: str) -> str:
    """A caption's words: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", caption_html)).split())


def decoded(data_uri: str) -> bytes:
    return base64.b64decode(data_uri.split(";base64,", 1)[1])


def searches(work):
    """Method -> search id, read off the run's recovery records (whatever the ids spell)."""
    found = {}
    for path in sorted((work / "results" / "tiny" / "ioi").glob("*/recovery.json")):
        found[json.loads(path.read_text())["method"]] = path.parent.name
    assert sorted(found) == sorted(METHODS), "one search per configured method"
    return found


def expected_results(work):
    tables = {f"results/tables/{name}.html": name for name in TABLES if name != "tuning"}
    figures = {f"results/figures/{name}.png": name for name in FIGURES}
    heatmaps = {f"results/tiny/ioi/{search}/heatmap.png": (method, search)
                for method, search in searches(work).items()}
    return tables, figures, heatmaps


@pytest.mark.slow
def test_report_holds_every_table_figure_and_heatmap(report_run):
    page = (report_run / "report.html").read_text()
    results = embedded(page, "results")
    tables, figures, heatmaps = expected_results(report_run)
    assert set(results) == set(tables) | set(figures) | set(heatmaps)
    for path, name in tables.items():
        entry = results[path]
        assert entry["labels"] == {"table": name, "shows": TABLES[name].about}
        assert entry["mime_type"] == "text/html"
        assert TABLES[name].about in text(entry["caption"])
        deltas = name not in ("table1", "table9", "table10")  # counts and head lists, no deltas
        assert ("Deltas are in percentage points" in text(entry["caption"])) == deltas, name
        shown = decoded(entry["data_uri"]).decode()
        assert shown == (report_run / path).read_text() and "<table>" in shown
    for path, name in figures.items():
        entry = results[path]
        assert entry["labels"] == {"figure": name, "shows": FIGURES[name].about}
        assert entry["mime_type"] == "image/png"
        assert FIGURES[name].about in text(entry["caption"])
        assert decoded(entry["data_uri"]) == (report_run / path).read_bytes()
    for path, (method, search) in heatmaps.items():
        entry = results[path]
        assert entry["labels"] == {"model": "tiny", "method": method, "search": search}
        assert entry["mime_type"] == "image/png"
        caption = text(entry["caption"])
        assert search in caption and "tiny / ioi" in caption
        # how to read this method's cells, and no other method's
        assert [m for m, phrase in READING.items() if phrase in caption] == [method], caption
        assert decoded(entry["data_uri"]) == (report_run / path).read_bytes()


@pytest.mark.slow
def test_report_groups_and_describes_the_run(report_run):
    page = (report_run / "report.html").read_text()
    categories = embedded(page, "categories")
    assert set(categories) == {"Tables", "Figures", "Heatmaps"}
    assert set(categories["Heatmaps"]) == {"ioi"}, "heatmaps grouped by task"
    description = embedded(page, "workflow_desc")
    assert "capability attention heads" in description
    assert "tiny" in description and "chg" in description, "the run's models and methods, from its config"


@pytest.mark.slow
def test_heatmaps_match_their_records(report_run):
    from PIL import Image

    from headloc.report.heatmap import figure_size

    sizes = {}
    for method, search in searches(report_run).items():
        folder = report_run / "results" / "tiny" / "ioi" / search
        record = json.loads((folder / "recovery.json").read_text())
        assert record["method"] == method
        with Image.open(folder / "heatmap.png") as image:
            sizes[method] = image.size
        panels = 2 if method == "chg" else 1  # chg's record carries its G- and G+ gates
        width, height = figure_size(record["n_layers"], record["n_heads"], panels)
        assert sizes[method] == (round(width * 120), round(height * 120))
        assert (report_run / "results" / "logs" / "plot_heatmap" / "tiny" / "ioi" / f"{search}.log").is_file()
    assert sizes["chg"][0] > sizes["cs_stratified"][0]
