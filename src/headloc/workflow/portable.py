"""What decides whether a job re-runs, keyed on content and never on where a checkout lives.

The workflow passes Snakemake no absolute path as a param or an input outside ``results/``: a task is
known by its name and a digest of its files (YAML, includes, Python, data, the mirror files it reads),
a model by its source's identity, a script by a digest of its text. Where the job then finds these
files in this checkout (the task folders, the data mirror, the GGUF inside the virtualenv) it works
out itself from the config (``task_folders``, ``mirror``, ``gguf_location``), so a ``results/``
folder copied into another clone at another path is up to date there (docs/outputs.md).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import os
from pathlib import Path
from typing import Iterable, Sequence

from headloc.workflow.task_lookup import task_folders


def _name(path: Path, roots: Sequence[Path]) -> str:
    """A file's name relative to the first root holding it (a task folder, the mirror, the working
    directory); else its own file name: never the absolute path of this checkout."""
    for root in roots:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return path.name


def files_digest(paths: Iterable[str | Path], roots: Sequence[str | Path] = ()) -> str:
    """sha256 of each file's relative name and content, in the given order (16 hex digits).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
    ...     for root in (a, b):
    ...         _ = (Path(root) / "t.yaml").write_text("task: t")
    ...     files_digest([Path(a) / "t.yaml"], [a]) == files_digest([Path(b) / "t.yaml"], [b])
    True
    """
    resolved = [Path(root).expanduser().resolve() for root in roots]
    digest = hashlib.sha256()
    for path in paths:
        path = Path(path).expanduser().resolve()
        digest.update(_name(path, resolved).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


PACKAGE = Path(__file__).resolve().parents[1]  # headloc's own folder, wherever it is installed


def code_digest(script: str | Path, package: Path = PACKAGE) -> str:
    """The digest of a rule's script and of every module of headloc it imports (:func:`code_files`),
    each named relative to its folder: a job re-runs when the code that made its output changes,
    in the script or in the library (docs/outputs.md, "Moving or sharing results")."""
    return files_digest(code_files(script, package), [Path(script).resolve().parent, package.parent])


def code_files(script: str | Path, package: Path = PACKAGE) -> list[Path]:
    """The script, then every module of ``package`` it imports at any depth (imports inside
    functions too, and the packages above each module), sorted. A module that lists its own folder
    (``pkgutil.iter_modules``: the method registry, the kinds) imports every module beside it."""
    script = Path(script).resolve()
    found, todo = set(), [script]
    while todo:
        path = todo.pop()
        if path not in found:
            found.add(path)
            todo.extend(_imports(path, package.resolve(), path.stat().st_mtime_ns))
    return [script, *sorted(found - {script})]


@functools.lru_cache(maxsize=None)
def _imports(path: Path, package: Path, mtime: int) -> tuple[Path, ...]:
    """The files of ``package``'s modules that one file imports (not following them); cached per
    file version (``mtime``: the Snakefile asks for the same modules once per script)."""
    inside = path.is_relative_to(package)
    own = path.relative_to(package.parent).with_suffix("").parts if inside else ()
    home = own[:-1]  # the package a relative import starts from (an __init__.py's own package)
    text = path.read_text()
    tree = ast.parse(text, str(path))
    names = []
    lists_folder = "iter_modules" in text and any(  # walk every node only where it may be called
        isinstance(node, ast.Attribute) and node.attr == "iter_modules" for node in ast.walk(tree))
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(home[: len(home) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    files = [file for name in names for file in _module_files(name, package)]
    if inside and lists_folder:
        files += sorted(path.parent.glob("*.py"))
    return tuple(files)


def _statements(body: list) -> Iterable[ast.stmt]:
    """Every statement at any depth (an import is a statement, so no expression is visited: the
    parse of every script's closure takes a share of each Snakefile parse)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            yield from _statements(getattr(node, field, []))


def _module_files(name: str, package: Path) -> list[Path]:
    """The files a dotted name of ``package`` loads: each package's ``__init__.py`` on the way and
    the module itself; none for another package's names or a name that is no module (a class)."""
    parts = name.split(".")
    if parts[0] != package.name:
        return []
    files = []
    for depth in range(1, len(parts) + 1):
        stem = package.parent.joinpath(*parts[:depth])
        file = next((f for f in (stem / "__init__.py", stem.with_suffix(".py")) if f.is_file()), None)
        if file is None:
            break
        files.append(file)
    return files


def lm_eval_version() -> str:
    """The installed lm-eval's version: part of every task's identity (its task code, its metrics)."""
    return importlib.metadata.version("lm_eval")


def mirror(config: dict) -> str | None:
    """The data mirror of this checkout (``data.mirror``, relative to the working directory)."""
    folder = (config.get("data") or {}).get("mirror")
    return os.path.abspath(os.path.expanduser(folder)) if folder else None


def checkout_relative(location: str) -> str:
    """A local path inside the working directory as a relative one (the same in every clone);
    one outside it (a shared model folder) or a hub id unchanged."""
    if not os.path.isabs(location):
        return location
    relative = os.path.relpath(location, os.getcwd())
    return location if relative.startswith("..") else relative


def source_identity(name: str, source) -> str:
    """A model source's identity: an embedded model's package and version, a GGUF file's name and
    size (relative to the working directory when inside it), a directory or hub id as given."""
    from headloc.model.loading import EMBEDDED

    if name in EMBEDDED:
        package, filename = EMBEDDED[name]
        try:
            version = importlib.metadata.version(package.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        return f"embedded:{package}=={version}/{filename}"
    if source.form == "gguf":
        return f"gguf:{checkout_relative(source.location)}:{os.path.getsize(source.location)}"
    return f"{source.form}:{checkout_relative(source.location)}"


def located(options: dict, config: dict) -> dict:
    """A job's task options with this checkout's data mirror filled in: the workflow's params say
    only whether the task reads a mirror (``dataset_kwargs.mirror``: True or False), the job finds it."""
    kwargs = options.get("dataset_kwargs") or {}
    if "mirror" not in kwargs:
        return options
    folder = mirror(config) if kwargs["mirror"] else None
    return {**options, "dataset_kwargs": {**kwargs, "mirror": folder}}


def gguf_location(config: dict, model: str) -> str:
    """The GGUF file a model is converted from, found in this checkout's environment."""
    from headloc.model.loading import resolve_source

    return resolve_source(config["models"][model]["source"]).location
