"""Atomic writing: all or nothing, with ordinary permissions."""

import os

import pytest

from fruit.io import atomic_open, atomic_write_json, atomic_write_text


def test_written_file_has_umask_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "hello")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.txt").read_text() == "hello"
    assert os.stat(tmp_path / "a.txt").st_mode & 0o777 == 0o644


def test_failure_leaves_old_content_and_no_temporary(tmp_path):
    target = tmp_path / "m.json"
    atomic_write_json(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_open(target) as f:
        f.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]
