"""Soak runs: a sound loader keeps its memory, descriptors and shared memory flat over epochs with
persistent workers, and a loader that leaks each of them is caught and named."""

import functools
import os
import threading
import time
from multiprocessing import shared_memory

import pytest
from torch.utils.data import Dataset

from labkit.datasets import PackedDataset
from labkit.eventlog import SharedLog
from labkit.procmem import running
from labkit.soak import GROWTH_LIMIT, MAIN, _join_threads_started_since, open_fds, run_soak


def _note_start(log, worker_id):
    log.append({"worker": worker_id})


def test_a_sound_loader_neither_grows_nor_leaks_over_epochs(encoded_pack):
    starts = SharedLog("labkit-test-soak-")
    report = run_soak(PackedDataset(encoded_pack, size=32), epochs=4, batch_size=4, num_workers=2,
                      worker_init_fn=functools.partial(_note_start, starts))
    assert sorted(r["worker"] for r in starts.records()) == [0, 1]  # the caller's init ran, once per worker
    assert report.problems() == [], report.summary()
    assert [e.epoch for e in report.epochs] == [1, 2, 3, 4]
    assert set(report.pids) == {MAIN, "worker 0", "worker 1"} and len(set(report.pids.values())) == 3
    assert all(0 < e.private[role] <= e.rss[role] and 0 < e.anonymous[role] <= e.rss[role]
               for e in report.epochs for role in report.pids)
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
        report = run_soak(LeaksInWorkers(PackedDataset(encoded_pack, size=32)), epochs=3, batch_size=4,
                          num_workers=2, step=leaky_step)
    finally:
        for f in files:
            f.close()
        for segment in segments:
            segment.unlink()
    problems = "\n".join(report.problems())
    for worker in ("worker 0", "worker 1"):  # 12 samples each per epoch: about 96 MiB more by epoch 3
        assert report.growth()[worker] > GROWTH_LIMIT
        assert f"{worker} (pid {report.pids[worker]}): RSS grew" in problems
    assert report.epochs[-1].open_fds - report.epochs[0].open_fds == 2 * 6  # one per batch, 6 batches an epoch
    assert "open file descriptors of the main process grew" in problems
    assert report.fds_after - report.fds_before >= 3 * 6 and "more open file descriptors after" in problems
    leaked = segments[0].name.lstrip("/")
    assert leaked in report.shm_left and leaked in problems


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
    _join_threads_started_since(threads)
    assert open_fds() == before
