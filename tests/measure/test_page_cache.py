import os
import tempfile

import numpy as np
import pytest

from labkit.measure.page_cache import (
    can_evict,
    empty_page_cache,
    evict,
    mapping_processes,
    resident_fraction,
    resident_share,
)

# Under the project, not /tmp: /tmp is often tmpfs, whose pages are the file and cannot be evicted.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_synced(path: str, size: int) -> str:
    """``size`` random bytes written through to disk, so eviction can drop them."""
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
    return path


def test_evict_drops_a_files_pages_from_the_cache():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        path = _write_synced(os.path.join(folder, "blob.bin"), 8 << 20)
        open(path, "rb").read()
        assert resident_fraction(path) > 0.9
        assert can_evict() and evict([path, os.path.join(folder, "missing")]) == 1
        assert resident_fraction(path) < 0.1


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="which process maps a file is read from Linux's /proc")
def test_a_mapped_file_names_its_process_and_stays_cached():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        path = _write_synced(os.path.join(folder, "blob.bin"), 4 << 20)
        assert mapping_processes(path) == []
        mapped = np.memmap(path, dtype=np.uint8, mode="r")
        int(mapped[::4096].sum())  # touch every page
        assert mapping_processes(path) == [os.getpid()]
        evict([path])
        assert resident_fraction(path) > 0.9  # what a notebook must explain when eviction "fails"
        del mapped
        assert mapping_processes(path) == []
        evict([path])
        assert resident_fraction(path) < 0.1


def test_empty_page_cache_says_how_and_leaves_the_files_cold():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        paths = [_write_synced(os.path.join(folder, f"blob{k}.bin"), (k + 1) << 20) for k in range(2)]
        for path in paths:
            open(path, "rb").read()
        assert resident_share(paths) > 0.9
        how = empty_page_cache(paths, system=False)
        assert how.startswith("posix_fadvise(DONTNEED) on 2 of 2 files")
        assert resident_share(paths) < 0.1


def test_resident_share_weighs_files_by_their_size():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        small = _write_synced(os.path.join(folder, "small.bin"), 1 << 20)
        large = _write_synced(os.path.join(folder, "large.bin"), 3 << 20)
        evict([small, large])
        open(large, "rb").read()
        assert 0.65 < resident_share([small, large]) < 0.85  # 3 MiB of 4 cached


def test_where_the_os_cannot_say_what_is_cached_the_share_is_not_known(monkeypatch):
    monkeypatch.setattr("labkit.measure.page_cache.load_libc", lambda: None)  # as on an OS without mincore
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        path = _write_synced(os.path.join(folder, "blob.bin"), 1 << 20)
        open(path, "rb").read()
        assert resident_fraction(path) is None and resident_share([path]) is None
