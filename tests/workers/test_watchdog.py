import multiprocessing
import time

import pytest

from labkit.workers.watchdog import LoaderHangError, LoaderWorkerError, watched_loader


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
    assert (
        "worker 1" in message
        and "dead (exit code -9, killed by SIGKILL)" in message
        and "fetching samples [6, 7]" in message
    )
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
    from labkit.core.shared_log import SharedLog
    from labkit.workers.watchdog import WatchedLoader

    loader = WatchedLoader(_LoaderWithADeadWorker(), timeout=1, dump_dir=str(tmp_path), log=SharedLog())
    with pytest.raises(LoaderWorkerError, match=r"a worker died \(ConnectionResetError.*\n.*pid 4242\): dead"):
        next(iter(loader))


class SlowInit:
    """A ``worker_init_fn`` that takes ``seconds`` (a slow import, a connection to a server)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, worker_id):
        time.sleep(self.seconds)


START_METHODS = [m for m in ("fork", "forkserver", "spawn") if m in multiprocessing.get_all_start_methods()]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", START_METHODS)
def test_under_every_start_method_a_stuck_worker_is_named_with_its_stack(method, no_leaks):
    # timeout=1 is shorter than a spawned worker's start-up (it imports torch): start-up must not count
    loader = watched_loader(StuckAt(stuck=5), timeout=1, batch_size=1, num_workers=2, multiprocessing_context=method)
    with pytest.raises(LoaderHangError) as err:
        list(loader)
    message = str(err.value)
    assert "worker 1" in message and "fetching samples [5]" in message and "wait_for_dead_mount" in message, message
    assert "killed by" not in message and multiprocessing.active_children() == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", START_METHODS)
def test_under_every_start_method_a_killed_worker_is_named(method, no_leaks):
    loader = watched_loader(DiesAt(stuck=6), timeout=20, batch_size=2, num_workers=2, multiprocessing_context=method)
    with pytest.raises(
        LoaderWorkerError,
        match=r"worker 1 \(pid \d+\): dead \(exit code -9, killed by SIGKILL\), "
        r"fetching samples \[6, 7\]",
    ):
        list(loader)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", START_METHODS)
def test_under_every_start_method_a_raising_worker_keeps_its_error(method, no_leaks):
    loader = watched_loader(RaisesAt(stuck=9), timeout=20, batch_size=2, num_workers=2, multiprocessing_context=method)
    with pytest.raises(ValueError, match="corrupt record") as err:
        list(loader)
    assert any("worker 0 while fetching samples [8, 9]" in n for n in err.value.__notes__)
    assert not any("not recorded" in n or "outside" in n for n in err.value.__notes__)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", START_METHODS)
def test_under_every_start_method_a_worker_still_starting_is_no_hang(method, no_leaks):
    # every worker takes 2 s to start, four times the timeout: the epoch must still finish
    loader = watched_loader(
        StuckAt(stuck=-1),
        timeout=0.5,
        batch_size=4,
        num_workers=2,
        worker_init_fn=SlowInit(2.0),
        multiprocessing_context=method,
    )
    assert [int(x) for b in loader for x in b] == list(range(16))
    assert loader.last_startup_s >= 2.0


@pytest.mark.timeout(60)
def test_a_worker_that_never_finishes_starting_is_reported_as_starting(monkeypatch, no_leaks):
    import labkit.workers.watchdog as watchdog

    monkeypatch.setattr(watchdog, "STARTUP_LIMIT_S", 1.0)
    loader = watched_loader(
        StuckAt(stuck=-1),
        timeout=0.5,
        batch_size=4,
        num_workers=2,
        worker_init_fn=SlowInit(60),
        multiprocessing_context="fork",
    )
    with pytest.raises(LoaderHangError) as err:
        list(loader)
    message = str(err.value)
    assert "worker 0 (pid" in message and "starting, in worker_init_fn" in message, message
    assert "in __call__" in message  # SlowInit's frame: its stack was asked for once its handler was installed
    assert "worker_init_fn" in message.splitlines()[-1]  # the fix speaks of start-up, not of I/O in the dataset


class _AliveWorker(_DeadWorker):
    exitcode = None

    def is_alive(self):
        return True


class _ResetWithEveryWorkerAlive(_ResetWhileReceiving):
    _workers = [_AliveWorker()]


class _LoaderWhoseConnectionBreaksForAnotherReason(_LoaderWithADeadWorker):
    def __iter__(self):
        return _ResetWithEveryWorkerAlive()


def test_a_broken_connection_with_every_worker_alive_is_reraised_and_says_so(tmp_path, monkeypatch):
    import labkit.workers.watchdog as watchdog
    from labkit.core.shared_log import SharedLog

    monkeypatch.setattr(watchdog, "DEATH_WAIT_S", 0.1)
    loader = watchdog.WatchedLoader(
        _LoaderWhoseConnectionBreaksForAnotherReason(), timeout=1, dump_dir=str(tmp_path), log=SharedLog()
    )
    with pytest.raises(ConnectionResetError) as err:
        next(iter(loader))
    assert any("every worker was still alive" in n for n in err.value.__notes__)
    assert not any("not recorded" in n for n in err.value.__notes__)


class RaisesInCollate:
    def __call__(self, samples):
        raise ValueError("collate cannot stack these")


@pytest.mark.timeout(60)
def test_an_error_outside_the_dataset_says_where_it_came_from(no_leaks):
    loader = watched_loader(StuckAt(stuck=-1), timeout=20, batch_size=2, num_workers=2, collate_fn=RaisesInCollate())
    with pytest.raises(ValueError, match="collate cannot stack") as err:
        list(loader)
    assert any("collate_fn" in n for n in err.value.__notes__), err.value.__notes__
