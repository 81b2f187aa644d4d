import os
import tempfile

from labkit.pagecache import can_evict, evict, resident_fraction

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
