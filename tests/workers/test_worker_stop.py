"""A DataLoader's workers stopped now, persistent ones included, and the next epoch starting fresh ones."""

import pytest
from torch.utils.data import DataLoader

from labkit.core.processes import running
from labkit.core.torch_internals import live_iterator, worker_processes
from labkit.workers.worker_stop import close_loader


@pytest.mark.timeout(60)
def test_closing_a_persistent_loader_stops_its_workers_and_the_next_epoch_starts_new_ones():
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, persistent_workers=True)
    assert sum(len(b) for b in loader) == 8
    pids = [w.pid for w in worker_processes(live_iterator(loader))]
    close_loader(loader)
    assert live_iterator(loader) is None and not any(running(p) for p in pids)
    assert sum(len(b) for b in loader) == 8  # fresh workers
    assert {w.pid for w in worker_processes(live_iterator(loader))}.isdisjoint(pids)
    close_loader(loader)
    close_loader(loader)  # nothing left to stop: a no-op
