"""docs/own-task.md, run exactly as written: every ```bash block in order, every file block
(```<language> <path>) written where it says, from an empty folder."""

import json
import os
import re
import subprocess

import pandas as pd
import pytest

from conftest import REPO

DOC = REPO / "docs" / "own-task.md"
BLOCK = re.compile(r"^```(\w+)(?: (\S+))?\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def tutorial_script() -> str:
    """The page as one bash script: commands as they are, files as quoted here-documents."""
    steps = ["set -euo pipefail"]
    for language, path, body in BLOCK.findall(DOC.read_text()):
        if path:
            steps.append(f"mkdir -p \"$(dirname '{path}')\"\ncat > '{path}' <<'HEADLOC_EOF'\n{body}HEADLOC_EOF")
        elif language == "bash":
            steps.append(body)
    return "\n".join(steps) + "\n"


def test_the_page_has_files_and_commands():
    script = tutorial_script()
    for path in ("tasks/colors.jsonl", "tasks/colors.yaml", "tasks/opposites.yaml", "tasks/utils.py", "config.yaml"):
        assert f"cat > '{path}'" in script
    assert "snakemake -s \"$HEADLOC/Snakefile\" table2" in script
    assert "headloc" not in BLOCK.findall(DOC.read_text())[2][2], "the task YAML needs nothing of headloc"


@pytest.mark.slow
def test_the_tutorial_runs_from_an_empty_folder(tmp_path):
    env = {**os.environ, "HEADLOC": str(REPO), "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(["bash", "-c", tutorial_script()], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    work = tmp_path / "my-heads"
    table = pd.read_csv(work / "results/tables/table2.csv")
    assert sorted(table["task"]) == ["colors", "opposites"] and set(table["k"]) == {2}
    assert "| mine | colors |" in result.stdout  # the page's `cat` of table2.md
    # headloc copied none of these documents; it recorded which ones it scored
    assert not (work / "results/data/colors/test.jsonl").exists()
    ids = json.loads((work / "results/data/colors/id_6_seed0.json").read_text())
    everything = json.loads((work / "results/data/colors/documents.json").read_text())
    assert everything["total"] == 12 and len(ids["doc_ids"]) == 6 and set(ids["doc_ids"]) <= set(range(12))
    scored = [json.loads(line) for line in
              next((work / "results/mine/colors").glob("cs_stratified_*/scores/0.samples.jsonl")).read_text().splitlines()]
    assert sorted(s["doc_id"] for s in scored[0]["samples"]) == ids["doc_ids"]
    baseline = json.loads((work / "results/mine/evals/opposites/none.json").read_text())
    assert baseline["metric"] == "first_word,none" and baseline["n_docs"] == 8
