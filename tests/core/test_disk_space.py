import errno
import os

import pytest

from labkit.core.disk_space import DiskFullError, disk_full_error, free_bytes, is_disk_full, require_space


def test_the_space_needed_is_compared_with_what_the_file_system_has(tmp_path):
    require_space(tmp_path / "new" / "x.pack", 1)  # a path not made yet is measured on its nearest folder
    with pytest.raises(DiskFullError, match=r"x.pack needs .* GiB \(2 files\) and its file system has .* free"):
        require_space(tmp_path / "x.pack", free_bytes(tmp_path) + (1 << 40), "2 files")
    assert not os.path.exists(tmp_path / "new")


def test_a_full_disk_is_recognised_and_said_in_one_line(tmp_path):
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied")) and not is_disk_full(ValueError())
    error = disk_full_error(tmp_path / "x.pack", 3 << 20)
    assert is_disk_full(error) and "\n" not in str(error)
    assert str(error).startswith(f"{tmp_path / 'x.pack'}: the disk filled up after 3.0 MiB had been written")


def test_the_error_survives_a_trip_through_a_pool_worker(tmp_path):
    import pickle

    error = pickle.loads(pickle.dumps(disk_full_error(tmp_path / "a", None)))
    assert isinstance(error, DiskFullError) and error.errno == errno.ENOSPC and "filled up" in str(error)
