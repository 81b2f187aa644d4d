import mmap
import os

import numpy as np
import pytest

from labkit.core.machine import os_name
from labkit.core.torch_internals import worker_processes
from labkit.measure.process_memory import (
    LINUX,
    PeakMemory,
    describe_tree_memory,
    private_bytes,
    read_memory,
    rss_bytes,
    tree_memory_bytes,
    tree_memory_measure,
    tree_rss_bytes,
)

MIB = 2**20


def test_private_memory_grows_with_what_this_process_writes():
    before = read_memory()
    block = np.ones(64 * MIB, dtype=np.uint8)  # 64 MiB, written
    after = read_memory()
    assert 48 * MIB < private_bytes() - before.uss < 96 * MIB
    assert rss_bytes() >= private_bytes() > 0
    if LINUX:
        for kind in ("unique_anonymous", "anonymous", "rss"):
            assert 48 * MIB < getattr(after, kind) - getattr(before, kind) < 96 * MIB, kind
    del block


@pytest.mark.skipif(not LINUX, reason="only Linux tells file-backed pages from anonymous ones")
def test_pages_of_a_mapped_file_are_file_backed_not_unique_anonymous(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(32 * MIB))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        before = read_memory()
        assert sum(mapped[i] for i in range(0, len(mapped), mmap.PAGESIZE)) >= 0  # touch every page
        after = read_memory()
    # on a tmpfs the file's pages are shared memory; on a disk, pages of the page cache
    mapped_growth = (after.file_backed + after.shared_memory) - (before.file_backed + before.shared_memory)
    assert mapped_growth > 28 * MIB and after.rss - before.rss > 28 * MIB
    assert abs(after.unique_anonymous - before.unique_anonymous) < 4 * MIB


def test_a_process_that_has_ended_or_never_was_reads_as_none_not_zero():
    from labkit.measure.process_memory import cpu_seconds

    assert private_bytes(2**22 + 12345) is None and rss_bytes(2**22 + 12345) is None
    assert read_memory(2**22 + 12345) is None
    assert cpu_seconds(2**22 + 12345) is None and cpu_seconds() > 0


def test_figures_the_os_does_not_give_are_none_and_the_os_is_named():
    reading = read_memory()
    assert reading.rss > 0 and os_name()
    linux_only = (reading.pss, reading.anonymous, reading.file_backed, reading.shared_memory, reading.unique_anonymous)
    if LINUX:
        assert None not in linux_only and reading.uss is not None and tree_memory_measure() == "PSS"
    else:
        assert linux_only == (None,) * 5 and f"not available on {os_name()}" in describe_tree_memory()


def test_tree_counts_worker_processes():
    import time

    from torch.utils.data import DataLoader

    from labkit.measure.process_memory import cpu_seconds, descendants, pss_bytes, tree_cpu_seconds

    loader = DataLoader(range(8), batch_size=2, num_workers=2, persistent_workers=True)
    iterator = iter(loader)
    next(iterator)
    workers = set(descendants())
    assert {w.pid for w in worker_processes(iterator)} <= workers
    assert tree_rss_bytes() > rss_bytes() and tree_cpu_seconds() >= cpu_seconds()
    if LINUX:  # forked workers share most of their pages with this process: PSS counts them once, RSS thrice
        assert pss_bytes() < tree_memory_bytes() < 0.8 * tree_rss_bytes()
    t0, deadline = cpu_seconds(), time.perf_counter() + 10
    while cpu_seconds() - t0 < 0.1:  # busy: the CPU time counted must rise (however the machine shares its cores)
        assert time.perf_counter() < deadline, "10 s of busy work counted less than 0.1 s of CPU"


def test_running_tells_a_live_process_from_an_exited_unreaped_one():
    import subprocess
    import sys
    import time

    from labkit.core.processes import running

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert running(child.pid)
    child.stdin.close()  # it exits; until wait() reaps it, it is a zombie
    deadline = time.monotonic() + 10
    while running(child.pid):
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    assert child.poll() == 0 and not running(child.pid)


@pytest.mark.parametrize("read", [None, tree_rss_bytes], ids=["tree memory", "RSS"])
def test_peak_follows_growth_but_samples_at_most_once_per_interval(read):
    make = PeakMemory if read is None else lambda interval: PeakMemory(interval, read, "RSS")
    eager, lazy = make(interval=0), make(interval=3600)
    lazy.sample("a batch")  # the first call always samples: the workers run by then
    before_eager, before_lazy = eager.peak, lazy.peak
    block = np.ones(64 * MIB, dtype=np.uint8)
    eager.sample(), lazy.sample("a batch")
    assert eager.peak >= before_eager + 48 * MIB and lazy.peak == before_lazy
    assert make(interval=1).measure == ("RSS" if read else tree_memory_measure())
    del block


def test_peak_rss_keeps_a_freed_allocation_until_reset():
    from labkit.measure.process_memory import peak_rss_bytes, reset_peak_rss

    if peak_rss_bytes() is None:
        pytest.skip(f"{os_name()} keeps no peak RSS for a process")
    reset_peak_rss()
    before = peak_rss_bytes()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, every page written
    del block
    assert peak_rss_bytes() >= before + 60 * 2**20
    if reset_peak_rss():
        assert peak_rss_bytes() < before + 32 * 2**20
