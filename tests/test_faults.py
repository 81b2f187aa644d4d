import multiprocessing as mp

import numpy as np
import pytest

from labkit.measure.page_faults import can_count_faults, minor_faults, tree_minor_faults

pytestmark = pytest.mark.skipif(not can_count_faults(), reason="page faults per process are read from Linux's /proc")


def test_touching_new_memory_counts_faults():
    before = minor_faults()
    block = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB of new pages, written
    assert minor_faults() - before >= 64 << 20 >> 21  # at least one fault per 2 MiB (huge pages)
    del block


def test_unknown_process_reads_as_zero():
    assert minor_faults(2**22 + 12345) == 0


def _touch(ready, done) -> None:
    np.ones(32 << 20, dtype=np.uint8)
    ready.set()
    done.wait(10)


def test_tree_counts_a_child_process():
    ctx = mp.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_touch, args=(ready, done))
    child.start()
    try:
        assert ready.wait(10)
        child_faults, own_faults = minor_faults(child.pid), minor_faults()
        assert child_faults > 0
        assert tree_minor_faults() >= own_faults + child_faults  # counts only grow
    finally:
        done.set()
        child.join(10)
