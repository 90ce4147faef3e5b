import os

import numpy as np
import pytest

from headloc.io import atomic_path, read_json, save_npy, write_json


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
