import multiprocessing
import time

import pytest

from labkit.watchdog import LoaderHangError, watched_loader


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
def test_stuck_worker_is_named_with_its_sample_and_stack_and_leaves_nothing_behind():
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
def test_healthy_loader_passes_through_untouched():
    loader = watched_loader(StuckAt(stuck=-1), timeout=5, batch_size=4, num_workers=2)
    assert [int(x) for b in loader for x in b] == list(range(16)) and len(loader) == 4


def test_needs_workers():
    with pytest.raises(ValueError, match="num_workers"):
        watched_loader(StuckAt(0), timeout=1, num_workers=0)
