"""trace_worker_memory: readings of every worker, and the copy-on-write gap it exists to show."""

from __future__ import annotations

import gc
import multiprocessing
import sys

import numpy as np
import pytest

from labkit.course.naive_datasets import NaivePathListDataset, PathTableDataset
from labkit.diagnose.worker_memory import MIB, trace_worker_memory

N = 100_000
linux_fork = pytest.mark.skipif(not sys.platform.startswith("linux") or multiprocessing.get_start_method() != "fork",
                                reason="private memory is read from /proc, and copy-on-write needs forked workers")


def _index(n: int):
    return [f"photos/{k % 10:02d}/{k:07d}.jpg" for k in range(n)], [k % 10 for k in range(n)]


@linux_fork
def test_readings_cover_every_worker_and_epoch():
    trace = trace_worker_memory(PathTableDataset(*_index(4000)), epochs=2, readings_per_epoch=2, batch_size=500,
                                num_workers=2, progress=False)
    assert trace.epochs == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert sorted(trace.private) == sorted(trace.rss) == ["worker 0", "worker 1"]
    for kind in (trace.private, trace.rss):
        assert all(len(values) == 5 and min(values) > 0 for values in kind.values())
    assert all(m.shape == (5,) and (m > 0).all() for m in trace.mib("rss").values())
    assert trace.start_method == "fork"
    assert not gc.get_freeze_count()  # the main process's objects are unfrozen again


@linux_fork
def test_python_list_is_copied_into_each_worker_and_numpy_is_not():
    paths, labels = _index(N)
    naive = trace_worker_memory(NaivePathListDataset(paths, labels), epochs=1, readings_per_epoch=1,
                                batch_size=1000, num_workers=2, progress=False)
    table = trace_worker_memory(PathTableDataset(paths, labels), epochs=1, readings_per_epoch=1,
                                batch_size=1000, num_workers=2, progress=False)
    string_bytes = sum(sys.getsizeof(p) for p in paths) / MIB  # what the list's strings occupy
    for worker in naive.private:  # the same run but for the container: the gap is the copied list
        gap = naive.mib()[worker][-1] - table.mib()[worker][-1]
        assert gap > 0.5 * string_bytes, (worker, gap, string_bytes)
    assert naive.mean_growth_mib() > table.mean_growth_mib()


def test_needs_workers():
    with pytest.raises(ValueError, match="num_workers >= 1"):
        trace_worker_memory(PathTableDataset(*_index(10)), num_workers=0)


@linux_fork
def test_pages_of_a_mapped_pack_count_in_rss_but_not_as_anonymous(tmp_path):
    """Workers that read a memory-mapped pack hold its pages: RSS grows by them (shared with the
    page cache, reclaimable), the unique anonymous reading (what a leak or copy-on-write grows) does not."""
    from labkit.datasets.map_style import DecodedArrayDataset
    from labkit.storage.pack_format import PackWriter

    path = tmp_path / "big.pack"
    with PackWriter(path, ["a"], decoded_shape=(3, 64, 64), alignment=64) as writer:
        for k in range(2048):  # 24 MiB of pixels
            writer.add(np.full((3, 64, 64), k % 251, np.uint8), 0, f"a/{k}.png")
    trace = trace_worker_memory(DecodedArrayDataset(str(path)), epochs=1, readings_per_epoch=1, batch_size=64,
                                num_workers=2, progress=False)
    rss, anonymous = trace.growth_mib("rss"), trace.growth_mib("anonymous")
    assert sorted(anonymous) == ["worker 0", "worker 1"]
    for worker in rss:
        assert rss[worker] > 8, (worker, rss[worker])  # each worker read half the pack, and maps more
        assert anonymous[worker] < 0.25 * rss[worker], (worker, anonymous[worker], rss[worker])


def test_growth_the_os_did_not_give_is_not_known_not_zero():
    from labkit.diagnose.worker_memory import WorkerMemoryTrace

    trace = WorkerMemoryTrace(epochs=[0.0, 1.0], private={"worker 0": [10 * MIB, 14 * MIB]},
                              anonymous={"worker 0": [None, None]}, rss={"worker 0": [20 * MIB, None]})
    assert trace.growth_mib("private") == {"worker 0": 4.0} and trace.mean_growth_mib("private") == 4.0
    assert trace.growth_mib("anonymous") == {"worker 0": None} and trace.mean_growth_mib("anonymous") is None
    assert trace.growth_mib("rss") == {"worker 0": None} and trace.mean_growth_mib("rss") is None
    assert WorkerMemoryTrace().mean_growth_mib() is None  # no worker read: nothing known, not 0 MiB
