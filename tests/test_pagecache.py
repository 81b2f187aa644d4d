import os
import tempfile

import numpy as np
import pytest

from labkit.pagecache import can_evict, evict, mapping_processes, resident_fraction

# Under the project, not /tmp: /tmp is often tmpfs, whose pages are the file and cannot be evicted.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_evict_drops_a_files_pages_from_the_cache():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        path = os.path.join(folder, "blob.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(8 << 20))
            f.flush()
            os.fsync(f.fileno())
        open(path, "rb").read()
        assert resident_fraction(path) > 0.9
        assert can_evict() and evict([path, os.path.join(folder, "missing")]) == 1
        assert resident_fraction(path) < 0.1


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="which process maps a file is read from Linux's /proc")
def test_a_mapped_file_names_its_process_and_stays_cached():
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".pagecache-test-") as folder:
        path = os.path.join(folder, "blob.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(4 << 20))
            f.flush()
            os.fsync(f.fileno())
        assert mapping_processes(path) == []
        mapped = np.memmap(path, dtype=np.uint8, mode="r")
        int(mapped[:: 4096].sum())  # touch every page
        assert mapping_processes(path) == [os.getpid()]
        evict([path])
        assert resident_fraction(path) > 0.9  # what a notebook must explain when eviction "fails"
        del mapped
        assert mapping_processes(path) == []
        evict([path])
        assert resident_fraction(path) < 0.1
