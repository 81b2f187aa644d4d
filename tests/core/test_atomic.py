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
    monkeypatch.setattr(
        atomic.os,
        "fsync",
        lambda fd: (
            synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else fd),
            real(fd),
        ),
    )
    write_atomic(tmp_path / "a", b"x")
    if os.name == "posix" and os.path.isdir("/proc/self/fd"):
        assert synced == [temporary_name(tmp_path / "a"), str(tmp_path)]
    synced.clear()
    write_atomic(tmp_path / "b", b"x", durable=False)
    assert synced == []


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_next_writer_removes_dead_writers_temporaries_and_says_what_it_freed(tmp_path, caplog):
    target = tmp_path / "x.pack"
    dead, live = f"{target}.tmp-{_dead_pid()}", f"{target}.tmp-{os.getppid()}"
    other = tmp_path / "y.pack.tmp-1"  # another target's: not this writer's to touch
    for path, size in ((dead, 3000), (live, 10), (other, 10)):
        open(path, "wb").write(b"\0" * size)
    with caplog.at_level("WARNING"):
        write_atomic(target, b"new")
    assert sorted(os.listdir(tmp_path)) == sorted(["x.pack", os.path.basename(live), other.name])
    assert "x.pack: removed 1 temporary file left by writers no longer running (2.9 KiB freed)" in caplog.text


def test_a_folder_of_files_is_cleared_in_one_walk(tmp_path):
    (tmp_path / "a").mkdir()
    dead = tmp_path / "a" / f"000001.jpg.tmp-{_dead_pid()}"
    dead.write_bytes(b"\0" * 100)
    (tmp_path / "a" / "000002.jpg").write_bytes(b"kept")
    freed = atomic.clear_dead_temporaries_in(tmp_path)
    assert (freed.files, freed.nbytes) == (1, 100) and os.listdir(tmp_path / "a") == ["000002.jpg"]
    assert atomic.clear_dead_temporaries_in(tmp_path) == (0, 0)


def test_a_write_that_cannot_fit_is_refused_before_it_starts(tmp_path):
    from labkit.core.disk_space import DiskFullError

    with pytest.raises(DiskFullError, match=r"big.bin needs .* GiB \(the data\) and its file system has .* free"):
        with atomic_file(tmp_path / "big.bin", size=1 << 62, what="the data"):
            raise AssertionError("the write should not start")
    assert os.listdir(tmp_path) == []


def test_a_disk_that_fills_during_the_write_is_one_error_naming_the_target(small_disk):
    from labkit.core.disk_space import DiskFullError

    disk = small_disk(64 << 10)
    target = os.path.join(disk, "result.json")
    write_atomic(target, b"old")
    with pytest.raises(DiskFullError, match=r"result.json: the disk filled up after .* had been written") as raised:
        with atomic_file(target) as f:
            for _ in range(100):
                f.write(b"\0" * 4096)
    assert raised.value.errno == 28 and "Errno" not in str(raised.value)
    assert os.listdir(disk) == ["result.json"] and open(target, "rb").read() == b"old"
