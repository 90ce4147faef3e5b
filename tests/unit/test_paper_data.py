"""headloc.data.paper_data and headloc.data.paper_normalizers: the paper's datasets from the offline
mirror (../shared/data)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from headloc.data.paper_data import (
    ARITHMETIC_SUBSETS,
    PAPER_DATASETS,
    SPLITS,
    load_docs,
)
from headloc.data.paper_normalizers import FIELDS, hellaswag_preprocess

SHARED_DATA = (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve()
pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="offline data mirror not available")

# Counts from ../shared/data/SOURCES.md.
COUNTS = {
    ("gsm8k", "test"): 1319, ("gsm8k", "train"): 7473, ("arithmetic", "test"): 20000,
    ("mbpp", "test"): 500, ("humaneval", "test"): 164, ("hellaswag", "test"): 10042,
    ("boolq", "test"): 3270, ("arc_challenge", "test"): 1172, ("arc_challenge", "train"): 1119,
    ("mmlu", "test"): 14042, ("mmlu", "dev"): 285, ("wmdp_bio", "test"): 1273,
    ("wmdp_chem", "test"): 408, ("wmdp_cyber", "test"): 1987,
}


def raw(relative: str) -> list[dict]:
    path = SHARED_DATA / relative
    data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(line) for line in data.decode().split("\n") if line.strip()]


def test_every_split_is_covered():
    assert sorted(COUNTS) == sorted((n, s) for n in PAPER_DATASETS for s in SPLITS[n])


@pytest.mark.parametrize(("name", "split"), sorted(COUNTS))
def test_counts_ids_and_fields(name, split):
    docs = load_docs(name, split, mirror=SHARED_DATA)
    assert len(docs) == COUNTS[name, split]
    ids = [d["id"] for d in docs]
    assert len(set(ids)) == len(ids)
    assert all(isinstance(i, str) and i.startswith(name) for i in ids)
    assert all(set(d) == {"id", *FIELDS[name]} for d in docs)
    assert load_docs(name, split, mirror=str(SHARED_DATA)) == docs  # stable, str or Path


def test_stable_ids_name_the_document():
    assert load_docs("gsm8k", mirror=SHARED_DATA)[42]["id"] == "gsm8k-0042"
    mmlu = load_docs("mmlu", mirror=SHARED_DATA)
    assert mmlu[3]["id"] == "mmlu-abstract_algebra-0003" and mmlu[3]["subject"] == "abstract_algebra"
    assert len({d["subject"] for d in mmlu}) == 57
    mbpp = load_docs("mbpp", mirror=SHARED_DATA)
    assert (mbpp[0]["id"], mbpp[0]["task_id"], mbpp[-1]["id"]) == ("mbpp-0011", 11, "mbpp-0510")
    humaneval = load_docs("humaneval", mirror=SHARED_DATA)
    assert (humaneval[7]["id"], humaneval[7]["task_id"]) == ("humaneval-007", "HumanEval/7")
    arc = load_docs("arc_challenge", mirror=SHARED_DATA)
    assert arc[0]["id"] == "arc_challenge-Mercury_7175875"


def test_arithmetic_matches_the_hf_script_output():
    """The 10 subsets, in order, normalized exactly as the SOURCES.md validation files."""
    docs = load_docs("arithmetic", mirror=SHARED_DATA)
    for k, subset in enumerate(ARITHMETIC_SUBSETS):
        part = docs[2000 * k: 2000 * (k + 1)]
        expected = raw(f"arithmetic/arithmetic_{subset}.validation.jsonl")
        assert [{"context": d["context"], "completion": d["completion"]} for d in part] == expected
        assert {d["subset"] for d in part} == {subset}
        assert part[5]["id"] == f"arithmetic-{subset}-0005"


def test_normalized_forms():
    boolq = load_docs("boolq", mirror=SHARED_DATA)
    assert {d["label"] for d in boolq} == {0, 1}
    assert [d["label"] for d in boolq[:20]] == [int(r["label"]) for r in raw("boolq/val.jsonl.gz")[:20]]
    arc = load_docs("arc_challenge", mirror=SHARED_DATA)[0]
    assert arc["question"].startswith("An astronomer observes")
    assert arc["choices"]["label"] == ["A", "B", "C", "D"] and arc["answerKey"] == "C"
    assert arc["choices"]["text"][2] == "Planetary days will become shorter."
    hellaswag = load_docs("hellaswag", mirror=SHARED_DATA)[0]
    assert hellaswag["query"] == "Roof shingle removal: A man is sitting on a roof. he"
    assert hellaswag["label"] == 3 and len(hellaswag["choices"]) == 4
    wmdp = load_docs("wmdp_chem", mirror=SHARED_DATA)[0]
    assert wmdp["answer"] == 1 and len(wmdp["choices"]) == 4


def test_records_with_u2028_are_not_split():
    """MMLU and WMDP-cyber hold U+2028 inside strings; str.splitlines() would break them."""
    mmlu = load_docs("mmlu", mirror=SHARED_DATA)
    cyber = load_docs("wmdp_cyber", mirror=SHARED_DATA)
    assert any("\u2028" in d["question"] + "".join(d["choices"]) for d in mmlu + cyber)


@pytest.mark.parametrize("text", [" How to cook [title] Boil water.  [step] Stir ",
                                  "[header] A  b [substeps] c", "plain"])
def test_hellaswag_preprocess_is_lm_evals(text):
    lm_eval_utils = pytest.importorskip("lm_eval.tasks.hellaswag.utils")
    assert hellaswag_preprocess(text) == lm_eval_utils.preprocess(text)


def test_unknown_name_and_split():
    with pytest.raises(ValueError, match="'gsm9k'.*gsm8k.*wmdp_cyber"):
        load_docs("gsm9k", mirror=SHARED_DATA)
    with pytest.raises(ValueError, match="no split 'train'.*test"):
        load_docs("boolq", "train", mirror=SHARED_DATA)


def test_missing_mirror_or_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_docs("gsm8k", mirror=tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"lacks gsm8k/test\.jsonl"):
        load_docs("gsm8k", mirror=tmp_path)
    (tmp_path / "arithmetic" / "raw_gpt3").mkdir(parents=True)
    shutil.copy(SHARED_DATA / "arithmetic/raw_gpt3/single_digit_three_ops.jsonl.gz",
                tmp_path / "arithmetic/raw_gpt3")
    with pytest.raises(FileNotFoundError, match="two_digit_addition.jsonl.gz"):
        load_docs("arithmetic", mirror=tmp_path)


def test_malformed_mirror_line_names_file_and_line(tmp_path):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text('{"question": "q", "answer": "a"}\n{oops\n')
    with pytest.raises(ValueError, match=r"test\.jsonl, line 2"):
        load_docs("gsm8k", mirror=tmp_path)
