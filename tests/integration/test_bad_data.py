"""Bad data fails with an error naming the file (and line) and what was expected."""

import shutil

import pytest
import yaml

from conftest import REPO, SHARED_DATA, snakemake
from headloc.workflow.config import check_config
from headloc.workflow.schema import validate_config
from headloc.data.datasets import identification_subset, read_jsonl
from headloc.model.loading import resolve_source


def test_missing_dataset_file(tmp_path):
    missing = tmp_path / "gsm8k" / "test.jsonl"
    with pytest.raises(FileNotFoundError, match=f"JSONL file not found: {missing}"):
        read_jsonl(missing)
    config = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    config["tasks"]["ioi"]["data_file"] = str(missing)
    validate_config(config, REPO / "config/schema.yaml")
    with pytest.raises(ValueError, match=f"config tasks.ioi.data_file: '{missing}' does not exist; expected a JSONL file"):
        check_config(config, {})


def test_identification_subset_larger_than_the_dataset(tmp_path):
    docs = read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")[:10]
    with pytest.raises(ValueError, match="cannot draw 20 documents from a dataset of 10 documents"):
        identification_subset(docs, 20, seed=0)
    config = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    config["tasks"]["ioi"].update(n_docs=10, id_docs=20)  # known before any job: fails at parse time
    validate_config(config, REPO / "config/schema.yaml")
    with pytest.raises(ValueError, match="config tasks.ioi.id_docs: 20 is larger than tasks.ioi.n_docs = 10"):
        check_config(config, {})


def test_malformed_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    lines = (SHARED_DATA / "gsm8k" / "test.jsonl").read_text().splitlines()[:3]
    path.write_text("\n".join([lines[0], lines[1][:-5], lines[2]]) + "\n")
    with pytest.raises(ValueError, match=rf"{path}, line 2: malformed JSON"):
        read_jsonl(path)
    path.write_text(lines[0] + "\n[1, 2]\n")
    with pytest.raises(ValueError, match=rf"{path}, line 2: expected a JSON object, got list"):
        read_jsonl(path)


def test_model_directory_without_weights(tmp_path, tiny_model_dir):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=rf"model directory '{model}' has no weights \(expected \*.safetensors"):
        resolve_source(str(model))
    config = {"models": {"tiny": {"source": str(model)}}, "tasks": {"ioi": {"lm_eval_task": "headloc_ioi"}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), check=False)
    assert result.returncode != 0
    assert f"config models.tiny.source: model directory '{model}' has no weights" in result.stdout + result.stderr


def test_chat_task_with_a_tokenizer_without_chat_template(tmp_path, tiny_model_dir):
    from headloc.engine.evaluation import load_evaluator
    from headloc.engine.lm_eval_tasks import TaskSpec

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "chat_template.jinja").unlink(missing_ok=True)
    config = (model / "tokenizer_config.json").read_text()
    assert "chat_template" not in yaml.safe_load(config)
    with pytest.raises(ValueError, match=rf"task headloc_swear is a chat task but the tokenizer '{model}' has no chat template"):
        load_evaluator(str(model), TaskSpec("headloc_swear", metric="profane_words", chat=True))


@pytest.mark.parametrize("lines, message", [
    (['{"choices": [" Mary", " John"], "label": 1}'],
     ", line 1: no field 'text'; task headloc_ioi reads fields choices, label, text (the document has choices, label)"),
    (['{"text": "x", "choices": [" Mary", " John"]}'], ", line 1: no field 'label'"),
    ([], ": no documents; expected one JSON object per line with fields choices, label, text for task headloc_ioi"),
], ids=["no prompt field", "no label", "empty file"])
def test_a_bad_data_file_fails_before_any_evaluation_and_leaves_no_copy(tmp_path, tiny_model_dir, lines, message):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(line + "\n" for line in lines))
    config = {"models": {"tiny": {"source": str(tiny_model_dir)}},
              "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "data_file": str(docs)}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("results/data/ioi/test.jsonl", "--cores", "1", "--directory", str(tmp_path),
                       "--configfile", str(tmp_path / "config.yaml"), check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/logs/materialize_dataset/ioi.log").read_text() + result.stderr
    assert f"{docs}{message}" in log
    assert not list((tmp_path / "results/data").rglob("*.jsonl")), "no copy, whole or partial"
