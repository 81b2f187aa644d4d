"""Notebook 04's probes of worker state and per-batch waits."""

from __future__ import annotations

import os
import pickle

import pytest
from torch.utils.data import DataLoader

from labkit.course.pitfalls import SlowAt
from labkit.course.worker_demos import BatchWaits, CallCountingDataset, ProcessCalls, calls_by_process, time_batch_waits


def test_counts_calls_in_the_process_that_makes_the_sample():
    ds = CallCountingDataset(5)
    assert len(ds) == 5 and ds.calls == 0
    assert [ds[i] for i in (0, 4, -1)] == [(0, os.getpid(), 1), (4, os.getpid(), 2), (4, os.getpid(), 3)]
    copy = pickle.loads(pickle.dumps(ds))
    assert copy[1] == (1, os.getpid(), 4) and ds.calls == 3  # a copy counts on from where it was made, alone
    with pytest.raises(IndexError):
        ds[5]
    with pytest.raises(ValueError):
        CallCountingDataset(0)


def test_calls_by_process_without_workers_sees_the_main_process_only():
    ds = CallCountingDataset(6)
    loader = DataLoader(ds, batch_size=4)
    assert calls_by_process(loader) == {os.getpid(): ProcessCalls(1, 6, 6)}
    assert calls_by_process(loader) == {os.getpid(): ProcessCalls(7, 12, 6)}  # the same copy, counting on
    assert calls_by_process(DataLoader(ds, batch_size=None)) == {os.getpid(): ProcessCalls(13, 18, 6)}


@pytest.mark.parametrize("persistent", [False, True])
def test_worker_state_survives_an_epoch_only_with_persistent_workers(persistent):
    ds = CallCountingDataset(8)
    loader = DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=persistent)
    first, second = calls_by_process(loader), calls_by_process(loader)
    assert len(first) == 2 and os.getpid() not in first and ds.calls == 0
    assert all(c == ProcessCalls(1, 4, 4) for c in first.values())
    if persistent:
        assert set(second) == set(first)
        assert all(c == ProcessCalls(5, 8, 4) for c in second.values())
    else:
        assert not set(second) & set(first)
        assert all(c == ProcessCalls(1, 4, 4) for c in second.values())
    del loader


def test_batch_waits_time_a_straggler_and_the_step():
    ds = SlowAt(list(range(6)), {4: 0.2})
    waits = time_batch_waits(DataLoader(ds, batch_size=2), step_s=0.01, key=lambda b: int(b[0]))
    assert waits.keys == [0, 2, 4] and len(waits.waits_s) == 2
    assert waits.waits_s[1] >= 0.2 > waits.waits_s[0]
    assert waits.worst_s == waits.waits_s[1] == waits.percentile_s(100)
    assert waits.percentile_s(0) == waits.waits_s[0]
    assert waits.total_s >= 0.2 + 3 * 0.01
    with pytest.raises(ValueError):
        waits.percentile_s(101)
    with pytest.raises(ValueError):
        time_batch_waits([], step_s=0.0)
    with pytest.raises(ValueError):
        time_batch_waits([1], step_s=-1)


def test_percentiles_of_no_waits_are_zero():
    assert BatchWaits([], 0.1, 0.1).worst_s == 0 == BatchWaits([], 0.1, 0.1).percentile_s(99)
    waits = BatchWaits([float(k) for k in range(1, 101)], 0.0, 1.0)
    assert waits.percentile_s(99) == 99.0 and waits.percentile_s(50) == 50.0


@pytest.fixture
def clock(fake_clock, monkeypatch):
    """The fake clock behind the kit's timing, and behind the demos' and the slow dataset's sleeps."""
    import labkit.course.pitfalls as pitfalls
    import labkit.course.worker_demos as worker_demos

    for module in (worker_demos, pitfalls):
        monkeypatch.setattr(module, "time", fake_clock)
    return fake_clock


def test_a_slow_first_batch_is_start_up_not_a_wait(clock):
    waits = time_batch_waits(DataLoader(SlowAt(list(range(4)), {0: 0.1}), batch_size=2))
    assert waits.first_s == pytest.approx(0.1) and waits.waits_s == [0.0]
    assert clock.now == pytest.approx(waits.first_s + waits.total_s)


def test_startup_batches_are_left_out_of_the_waits(clock):
    ds = SlowAt(list(range(8)), {2: 0.1})  # the second batch is slow
    waits = time_batch_waits(DataLoader(ds, batch_size=2), key=lambda b: int(b[0]), startup_batches=2)
    assert waits.keys == [0, 2, 4, 6] and waits.waits_s == [0.0, 0.0] and waits.first_s == pytest.approx(0.1)
    with pytest.raises(ValueError):
        time_batch_waits(DataLoader(ds, batch_size=2), startup_batches=0)
    assert time_batch_waits([1, 2], startup_batches=5).waits_s == []  # an epoch shorter than its start-up


def test_the_epoch_ends_with_the_last_step_not_with_the_loader_s_shutdown(clock):
    def slow_to_stop():
        yield 1
        yield 2
        clock.sleep(0.2)  # as a DataLoader joins its workers after the last batch

    waits = time_batch_waits(slow_to_stop(), step_s=0.01)
    assert len(waits.waits_s) == 1 and waits.total_s == pytest.approx(0.02)  # two steps, not the 0.2 s shutdown
