"""A producer thread a few batches ahead: every batch in order, the producer's error raised in the loop, no thread
left when the loop stops early, and at most ``ahead`` batches made before they are asked for."""

import threading
import time

import pytest

from labkit.core.errors import LabkitError
from labkit.workers.batches_ahead import BatchesAhead


def _producers() -> int:
    return sum(t.name == "labkit-thread-loader" for t in threading.enumerate())


class _Counted:
    def __init__(self, n, fail_at=None):
        self.n, self.fail_at, self.made = n, fail_at, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        for k in range(self.n):
            if k == self.fail_at:
                raise OSError(f"batch {k} could not be read")
            self.made += 1
            yield k


def test_every_batch_in_order_and_no_more_than_ahead_made_early():
    source = _Counted(10)
    loader = BatchesAhead(source, ahead=2)
    seen = []
    for batch in loader:
        if batch == 0:
            time.sleep(0.2)  # the producer fills the queue meanwhile, and stops there
            assert source.made <= 1 + 2 + 1  # the one taken, two queued, one held waiting for room
        seen.append(batch)
    assert seen == list(range(10)) and len(loader) == 10 and _producers() == 0


def test_the_producers_error_is_raised_in_the_loop_and_stopping_early_leaves_no_thread():
    with pytest.raises(OSError, match="batch 3 could not be read"):
        list(BatchesAhead(_Counted(10, fail_at=3), ahead=1))
    for k in BatchesAhead(_Counted(100), ahead=4):
        if k == 2:
            break
    assert _producers() == 0
    with pytest.raises(LabkitError, match="prefetch_factor=0: at least 1"):
        BatchesAhead([], ahead=0)
