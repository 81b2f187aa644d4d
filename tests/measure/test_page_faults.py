import multiprocessing as mp

import numpy as np
import pytest

from labkit.core.errors import LabkitValueError
from labkit.measure import page_faults
from labkit.measure.page_faults import can_count_faults, fault_seconds, minor_faults, tree_minor_faults

linux_proc = pytest.mark.skipif(not can_count_faults(), reason="page faults per process are read from Linux's /proc")


def _no_proc(monkeypatch):
    """This process as on macOS or Windows: no /proc to read the counts from."""

    def refused(path, *args, **kwargs):
        raise FileNotFoundError(path)

    from labkit.measure import page_faults

    monkeypatch.setattr(page_faults, "open", refused, raising=False)  # the module's open, not the builtin


def test_where_the_os_does_not_count_faults_they_are_not_known_not_zero(monkeypatch):
    _no_proc(monkeypatch)
    assert minor_faults() is None
    assert tree_minor_faults() is None


@linux_proc
def test_touching_new_memory_counts_faults():
    before = minor_faults()
    block = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB of new pages, written
    assert minor_faults() - before >= 64 << 20 >> 21  # at least one fault per 2 MiB (huge pages)
    del block


@linux_proc
def test_a_process_that_is_gone_reads_as_not_known():
    assert minor_faults(2**22 + 12345) is None
    assert tree_minor_faults(2**22 + 12345) is None


def _touch(ready, done) -> None:
    np.ones(32 << 20, dtype=np.uint8)
    ready.set()
    done.wait(10)


@linux_proc
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


def test_a_fault_costs_a_positive_time_under_a_millisecond():
    cost = fault_seconds(pages=256, repeats=3)
    assert 0 < cost < 1e-3  # a first touch is kernel work on one page: well under a millisecond anywhere


@linux_proc
def test_the_fresh_segment_that_fault_seconds_times_does_fault_on_first_touch(monkeypatch):
    counted = []
    real_fill = np.ndarray.fill

    class Counting(np.ndarray):
        def fill(self, value):
            before = minor_faults()
            real_fill(self, value)
            counted.append(minor_faults() - before)

    monkeypatch.setattr(page_faults.np, "ndarray", Counting)
    fault_seconds(pages=512, repeats=1)
    first, again = counted
    assert first >= 512 // 8 and again < first  # first touch faults (huge pages may group 512 into one); again not


def test_fault_seconds_refuses_nonsense():
    with pytest.raises(LabkitValueError, match="both at least 1"):
        fault_seconds(pages=0)
