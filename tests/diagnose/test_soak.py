"""Soak runs: a sound loader keeps its memory, descriptors and shared memory flat over epochs with
persistent workers, and a loader that leaks each of them is caught and named; trace_worker_memory's readings
of every worker, and the copy-on-write gap it exists to show."""

import functools
import gc
import multiprocessing
import os
import sys
import threading
import time
from multiprocessing import shared_memory

import numpy as np
import pytest
from torch.utils.data import Dataset

from labkit.core.processes import running
from labkit.core.shared_log import SharedLog
from labkit.datasets.pack_datasets import PackedDataset
from labkit.diagnose.soak import (
    GROWTH_FLOOR,
    GROWTH_LIMIT,
    MAIN,
    MIB,
    EpochRecord,
    SoakReport,
    join_threads_started_since,
    open_fds,
    run_soak,
    trace_worker_memory,
)
from labkit.harness.naive_datasets import NaivePathListDataset, PathTableDataset
from labkit.measure.process_memory import LINUX, MEASURES
from labkit.storage.image_folder import scan_image_folder
from labkit.storage.pack_format import PackWriter


def _note_start(log, worker_id):
    log.append({"worker": worker_id})


def test_a_sound_loader_neither_grows_nor_leaks_over_epochs(encoded_pack):
    starts = SharedLog("labkit-test-soak-")
    report = run_soak(
        PackedDataset(encoded_pack, size=32),
        epochs=4,
        batch_size=4,
        num_workers=2,
        worker_init_fn=functools.partial(_note_start, starts),
    )
    assert sorted(r["worker"] for r in starts.records()) == [0, 1]  # the caller's init ran, once per worker
    assert report.problems() == [], report.summary()
    assert [e.epoch for e in report.epochs] == [1, 2, 3, 4]
    assert set(report.pids) == {MAIN, "worker 0", "worker 1"} and len(set(report.pids.values())) == 3
    assert report.first_batch.epoch == 0 and set(report.first_batch.rss) == set(report.pids)
    readings = [report.first_batch, *report.epochs]
    assert all(0 < e.uss[role] <= e.rss[role] for e in readings for role in report.pids)
    if LINUX:
        assert report.leak_measure == "unique_anonymous" and report.unavailable() == []
        assert all(
            0 < e.unique_anonymous[role] <= e.anonymous[role] <= e.rss[role] for e in readings for role in report.pids
        )
    assert report.fds_after <= report.fds_before  # fewer only if an earlier test's queue closed a pipe meanwhile
    assert not any(running(pid) for role, pid in report.pids.items() if role != MAIN)


_hoard = []  # in each worker: what the leaky dataset never lets go of


class LeaksInWorkers(Dataset):
    """Keeps 4 MiB per sample it reads, as a cache without a bound would."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        _hoard.append(b"\1" * (4 << 20))  # written, so resident
        return self.dataset[index]


def test_a_leaking_loader_is_caught_and_each_leak_named(encoded_pack):
    files, segments = [], []

    def leaky_step(batch):  # a training step that keeps a file and a shared-memory segment it should not
        files.append(open(os.devnull, "rb"))
        if not segments:
            segments.append(shared_memory.SharedMemory(create=True, size=4096))
            segments[0].close()

    try:
        report = run_soak(
            LeaksInWorkers(PackedDataset(encoded_pack, size=32)), epochs=3, batch_size=4, num_workers=2, step=leaky_step
        )
    finally:
        for f in files:
            f.close()
        for segment in segments:
            segment.unlink()
    problems = "\n".join(report.problems())
    for worker in ("worker 0", "worker 1"):  # 4 MiB for each of its 12 samples an epoch, kept: ~128 MiB by epoch 3
        assert report.growth()[worker] > GROWTH_LIMIT
        assert f"{worker} (pid {report.pids[worker]}): {MEASURES[report.leak_measure]}" in problems
    assert report.epochs[-1].open_fds - report.epochs[0].open_fds == 2 * 6  # one per batch, 6 batches an epoch
    assert "open file descriptors of the main process grew" in problems
    assert report.fds_after - report.fds_before >= 3 * 6 and "more open file descriptors after" in problems
    leaked = segments[0].name.lstrip("/")
    assert leaked in report.shm_left and leaked in problems


class FramePathsAsPythonLists(Dataset):
    """A video data set's index the textbook way: each clip's frame paths in a Python list of str.
    A forked worker that reads a clip writes the reference counts of its strings, which copies every
    page they sit on out of the parent's memory (~60 MiB of strings here)."""

    def __init__(self, clips=4000, frames=160):
        self.frames = [[f"clips/{c:06d}/frame_{f:04d}.jpg" for f in range(frames)] for c in range(clips)]

    def __len__(self):
        return len(self.frames)

    def __getitem__(self, index):
        return sum(len(path) for path in self.frames[index])


LINUX_ONLY = pytest.mark.skipif(
    not LINUX,
    reason="fork workers and the kinds of pages (unique anonymous, "
    "file-backed) are Linux's; elsewhere workers are spawned",
)


@LINUX_ONLY
def test_copy_on_write_of_python_objects_read_by_workers_is_caught():
    report = run_soak(FramePathsAsPythonLists(), epochs=3, batch_size=100, num_workers=2)
    problems = "\n".join(report.problems())
    for worker in ("worker 0", "worker 1"):
        assert report.growth()[worker] > GROWTH_LIMIT, report.summary()
        assert report.epochs[-1].unique_anonymous[worker] - report.first_batch.unique_anonymous[worker] > GROWTH_FLOOR
        assert f"{worker} (pid {report.pids[worker]}): unique anonymous memory grew" in problems
        assert "copy-on-write" in problems
        # copying a page replaces a resident page: RSS and anonymous memory cannot show it
        assert report.growth("rss")[worker] < GROWTH_LIMIT and report.growth("anonymous")[worker] < GROWTH_LIMIT


PADDING = 1 << 20  # bytes of metadata per photo


def _with_metadata(jpeg: bytes, size: int) -> bytes:
    """The same JPEG carrying ``size`` bytes of application data (as cameras add EXIF, maker notes, previews)."""
    chunk = 65533  # the most one segment holds
    segments = b"".join(
        b"\xff\xef" + (min(chunk, size - at) + 2).to_bytes(2, "big") + b"\0" * min(chunk, size - at)
        for at in range(0, size, chunk)
    )
    return jpeg[:2] + segments + jpeg[2:]


@pytest.fixture(scope="module")
def heavy_pack(photos, tmp_path_factory):
    """96 photos of 1 MiB each: a 96 MiB encoded pack, bigger than what a worker reads in one epoch."""
    scan = scan_image_folder(photos)
    path = str(tmp_path_factory.mktemp("soak") / "heavy.pack")
    with PackWriter(path, scan.classes) as writer:
        for i in range(96):
            j = i % len(scan)
            with open(scan.abspath(j), "rb") as f:
                writer.add(_with_metadata(f.read(), PADDING), int(scan.labels[j]), f"{i:03d}-{scan.relpaths[j]}")
    return path


@LINUX_ONLY
def test_pages_of_the_mapped_pack_are_reported_as_such_not_as_a_leak(heavy_pack):
    report = run_soak(PackedDataset(heavy_pack, "pil-reduced", size=32), epochs=8, batch_size=8, num_workers=2)
    assert report.problems() == [], report.summary()
    notes = "\n".join(report.notes())
    for worker in ("worker 0", "worker 1"):
        # each worker maps more of the 96 MiB pack every epoch: RSS climbs as it did for the user who
        # filed this, and the growth is pages of the file (on a tmpfs, shared memory), not the heap
        mapped = sum(
            getattr(report.epochs[-1], kind)[worker] - getattr(report.first_batch, kind)[worker]
            for kind in ("file_backed", "shared_memory")
        )
        assert mapped > 48 * 2**20, report.summary()
        assert report.epochs[-1].rss[worker] - report.first_batch.rss[worker] > 48 * 2**20
        assert report.epochs[-1].unique_anonymous[worker] - report.first_batch.unique_anonymous[worker] < GROWTH_FLOOR
        assert f"{worker}: RSS grew" in notes
    assert "pages of mapped files (a pack read through mmap" in notes and "not a leak" in notes
    assert "ok: no process's unique anonymous memory grew" in report.summary()


def test_fewer_than_two_epochs_cannot_show_growth(encoded_pack):
    with pytest.raises(ValueError, match="at least 2"):
        run_soak(PackedDataset(encoded_pack, size=32), epochs=1)


def test_descriptors_closed_late_by_a_helper_thread_are_not_counted_as_left_open():
    before, threads = open_fds(), set(threading.enumerate())
    reader, writer = os.pipe()

    def close_late():  # as a multiprocessing queue's feeder thread closes its pipe after shutdown
        time.sleep(0.3)
        os.close(reader)
        os.close(writer)

    threading.Thread(target=close_late).start()
    join_threads_started_since(threads)
    assert open_fds() == before


def test_where_the_os_does_not_list_descriptors_they_are_not_known_and_not_judged(monkeypatch):
    monkeypatch.setattr("labkit.diagnose.soak.FD_LISTINGS", ("/no-such-fd-listing",))  # as on Windows
    assert open_fds() is None

    def record(epoch):
        return EpochRecord(
            epoch, 1.0, open_fds(), rss={MAIN: 100 << 20}, uss={MAIN: 60 << 20}, unique_anonymous={MAIN: 50 << 20}
        )

    report = SoakReport(record(0), [record(1), record(2)], {MAIN: os.getpid()}, open_fds(), open_fds(), [], [])
    assert report.problems() == []  # nothing known grew: no descriptor finding either
    assert "open file descriptors" in report.unavailable()
    summary = report.summary()
    assert "open fds of main: n/a before, n/a after epoch 1" in summary and "not available on" in summary


N = 100_000
linux_fork = pytest.mark.skipif(
    not sys.platform.startswith("linux") or multiprocessing.get_start_method() != "fork",
    reason="private memory is read from /proc, and copy-on-write needs forked workers",
)


def _index(n: int):
    return [f"photos/{k % 10:02d}/{k:07d}.jpg" for k in range(n)], [k % 10 for k in range(n)]


@linux_fork
def test_readings_cover_every_worker_and_epoch():
    trace = trace_worker_memory(
        PathTableDataset(*_index(4000)), epochs=2, readings_per_epoch=2, batch_size=500, num_workers=2, progress=False
    )
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
    naive = trace_worker_memory(
        NaivePathListDataset(paths, labels),
        epochs=1,
        readings_per_epoch=1,
        batch_size=1000,
        num_workers=2,
        progress=False,
    )
    table = trace_worker_memory(
        PathTableDataset(paths, labels), epochs=1, readings_per_epoch=1, batch_size=1000, num_workers=2, progress=False
    )
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
    from labkit.datasets.pack_datasets import DecodedArrayDataset
    from labkit.storage.pack_format import PackWriter

    path = tmp_path / "big.pack"
    with PackWriter(path, ["a"], decoded_shape=(3, 64, 64), alignment=64) as writer:
        for k in range(2048):  # 24 MiB of pixels
            writer.add(np.full((3, 64, 64), k % 251, np.uint8), 0, f"a/{k}.png")
    trace = trace_worker_memory(
        DecodedArrayDataset(str(path)), epochs=1, readings_per_epoch=1, batch_size=64, num_workers=2, progress=False
    )
    rss, anonymous = trace.growth_mib("rss"), trace.growth_mib("anonymous")
    assert sorted(anonymous) == ["worker 0", "worker 1"]
    for worker in rss:
        assert rss[worker] > 8, (worker, rss[worker])  # each worker read half the pack, and maps more
        assert anonymous[worker] < 0.25 * rss[worker], (worker, anonymous[worker], rss[worker])


def test_growth_the_os_did_not_give_is_not_known_not_zero():
    from labkit.diagnose.soak import WorkerMemoryTrace

    trace = WorkerMemoryTrace(
        epochs=[0.0, 1.0],
        private={"worker 0": [10 * MIB, 14 * MIB]},
        anonymous={"worker 0": [None, None]},
        rss={"worker 0": [20 * MIB, None]},
    )
    assert trace.growth_mib("private") == {"worker 0": 4.0} and trace.mean_growth_mib("private") == 4.0
    assert trace.growth_mib("anonymous") == {"worker 0": None} and trace.mean_growth_mib("anonymous") is None
    assert trace.growth_mib("rss") == {"worker 0": None} and trace.mean_growth_mib("rss") is None
    assert WorkerMemoryTrace().mean_growth_mib() is None  # no worker read: nothing known, not 0 MiB
