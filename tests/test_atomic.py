import os

import pytest

from labkit.core import atomic
from labkit.core.atomic import atomic_file, temporary_name, write_atomic


def test_a_write_is_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "manifest.json"
    write_atomic(target, b"first")
    write_atomic(target, b"second")
    assert target.read_bytes() == b"second" and os.listdir(tmp_path) == ["manifest.json"]


def test_a_write_that_fails_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "state.ckpt"
    write_atomic(target, b"good")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_file(target) as f:
            f.write(b"half of a new")
            assert f.name == temporary_name(target) and os.path.exists(f.name)
            raise RuntimeError("disk full")
    assert target.read_bytes() == b"good" and os.listdir(tmp_path) == ["state.ckpt"]


def test_durable_writes_fsync_the_file_and_then_its_folder(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")
                                                                      if os.path.isdir("/proc/self/fd") else fd),
                                                        real(fd)))
    write_atomic(tmp_path / "a", b"x")
    if os.name == "posix" and os.path.isdir("/proc/self/fd"):
        assert synced == [temporary_name(tmp_path / "a"), str(tmp_path)]
    synced.clear()
    write_atomic(tmp_path / "b", b"x", durable=False)
    assert synced == []
