import multiprocessing
import time

import pytest

from labkit.watchdog import LoaderHangError, LoaderWorkerError, watched_loader


class StuckAt:
    """Returns its index, except one index where it blocks (a stand-in for a dead NFS read)."""

    def __init__(self, stuck: int, n: int = 16):
        self.stuck, self.n = stuck, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.stuck:
            wait_for_dead_mount()
        return i

    def sample_path(self, i):
        return f"/mnt/nfs/sample-{i}.jpg"


def wait_for_dead_mount():
    time.sleep(120)


@pytest.mark.timeout(60)
def test_stuck_worker_is_named_with_its_sample_and_stack_and_leaves_nothing_behind(no_leaks):
    loader = watched_loader(StuckAt(stuck=5), timeout=2, batch_size=1, num_workers=2)
    got = []
    t0 = time.monotonic()
    with pytest.raises(LoaderHangError) as err:
        for batch in loader:
            got.append(int(batch))
    elapsed = time.monotonic() - t0
    message = str(err.value)
    assert got == [0, 1, 2, 3, 4]
    assert "worker 1" in message and "fetching samples [5]" in message and "/mnt/nfs/sample-5.jpg" in message
    assert "wait_for_dead_mount" in message  # the worker's own stack
    assert elapsed < 20
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(60)
def test_healthy_loader_passes_through_untouched(no_leaks):
    loader = watched_loader(StuckAt(stuck=-1), timeout=5, batch_size=4, num_workers=2)
    assert [int(x) for b in loader for x in b] == list(range(16)) and len(loader) == 4


def test_needs_workers():
    with pytest.raises(ValueError, match="num_workers"):
        watched_loader(StuckAt(0), timeout=1, num_workers=0)


class DiesAt(StuckAt):
    """Its worker is killed (as the OOM killer would) when it reaches one index."""

    def __getitem__(self, i):
        if i == self.stuck:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        return i


class RaisesAt(StuckAt):
    def __getitem__(self, i):
        if i == self.stuck:
            raise ValueError("corrupt record")
        return i


@pytest.mark.timeout(60)
def test_killed_worker_is_named_with_its_samples_and_nothing_is_left_behind(no_leaks):
    loader = watched_loader(DiesAt(stuck=6), timeout=20, batch_size=2, num_workers=2)
    with pytest.raises(LoaderWorkerError) as err:
        list(loader)
    message = str(err.value)
    assert "a worker died" in message and "out-of-memory" in message
    assert "worker 1" in message and "dead (exit code -9)" in message and "fetching samples [6, 7]" in message
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(60)
def test_exception_in_a_worker_keeps_its_type_and_says_what_was_in_flight(no_leaks):
    loader = watched_loader(RaisesAt(stuck=9), timeout=20, batch_size=2, num_workers=2)
    with pytest.raises(ValueError, match="corrupt record") as err:
        list(loader)
    notes = getattr(err.value, "__notes__", [])
    assert any("worker 0 while fetching samples [8, 9]" in n and "/mnt/nfs/sample-8.jpg" in n for n in notes), notes


@pytest.mark.timeout(60)
def test_after_a_fault_a_persistent_loader_starts_fresh_workers(no_leaks):
    loader = watched_loader(RaisesAt(stuck=9), timeout=20, batch_size=2, num_workers=2, persistent_workers=True)
    for epoch in range(2):
        with pytest.raises(ValueError, match="corrupt record"):
            list(loader)
        assert multiprocessing.active_children() == [], f"epoch {epoch} left its workers running"


class _DeadWorker:
    pid, exitcode = 4242, -9  # killed by SIGKILL

    def is_alive(self):
        return False

    def join(self, timeout=None):
        pass


class _ResetWhileReceiving:
    """A DataLoader iterator whose worker died while handing over a batch's file descriptor."""

    _workers = [_DeadWorker()]

    def __next__(self):
        raise ConnectionResetError(104, "Connection reset by peer")

    def _shutdown_workers(self):
        pass


class _LoaderWithADeadWorker:
    dataset = list(range(8))

    def __iter__(self):
        return _ResetWhileReceiving()


def test_a_broken_connection_from_a_dead_worker_is_reported_as_its_death(tmp_path):
    from labkit.eventlog import SharedLog
    from labkit.watchdog import WatchedLoader

    loader = WatchedLoader(_LoaderWithADeadWorker(), timeout=1, dump_dir=str(tmp_path), log=SharedLog())
    with pytest.raises(LoaderWorkerError, match=r"a worker died \(ConnectionResetError.*\n.*pid 4242\): dead"):
        next(iter(loader))
