import os

import numpy as np
import pytest

import pandas as pd

from headloc.io import atomic_path, read_json, save_npy, write_json, write_table, write_text


def test_targets_appear_whole_with_ordinary_permissions(tmp_path):
    target = tmp_path / "sub" / "x.json"
    write_json(target, {"a": 1})
    assert read_json(target) == {"a": 1}
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
    save_npy(tmp_path / "m.npy", np.eye(2))
    assert np.array_equal(np.load(tmp_path / "m.npy"), np.eye(2))
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["m.npy", "sub", "x.json"], "no temp files left"


def test_a_failed_write_leaves_the_old_target_and_no_temp_file(tmp_path):
    target = tmp_path / "x.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


@pytest.mark.parametrize("write, target", [
    (lambda path: write_text(path, "new"), "x.txt"),
    (lambda path: write_json(path, {"new": 1}), "x.json"),
    (lambda path: save_npy(path, np.ones(3)), "x.npy"),
    (lambda path: write_table(path, pd.DataFrame({"new": [1]})), "x.tsv"),
], ids=["write_text", "write_json", "save_npy", "write_table"])
def test_every_public_writer_goes_through_a_temporary_file(tmp_path, monkeypatch, write, target):
    """A writer that opened the target itself would leave half a file when killed: each writer's
    bytes must land in a temporary file beside the target, renamed into place by os.replace."""
    path = tmp_path / target
    path.write_text("old")
    replaced = []
    real_replace = os.replace

    def spy(source, destination):
        # at the moment of the rename the target still holds the old content
        assert path.read_text() == "old", "the target was written before the rename"
        replaced.append((os.path.basename(source), os.path.basename(destination)))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", spy)
    write(path)
    assert len(replaced) == 1 and replaced[0][1] == target and replaced[0][0].startswith(f".{target}.")
    assert path.read_bytes() != b"old"
