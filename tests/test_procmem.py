import numpy as np

from labkit.procmem import private_bytes, rss_bytes


def test_private_memory_grows_with_what_this_process_writes():
    before = private_bytes()
    block = np.ones(64 * 1024 * 1024, dtype=np.uint8)  # 64 MiB, written
    grown = private_bytes() - before
    assert 48 * 2**20 < grown < 96 * 2**20, grown
    assert rss_bytes() >= private_bytes() > 0
    del block


def test_unknown_process_reads_as_zero():
    assert private_bytes(2**22 + 12345) == 0 and rss_bytes("no-such-pid") == 0
