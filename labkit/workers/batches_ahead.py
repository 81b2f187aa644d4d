"""A loader without worker processes, one producer thread ahead: what FFCV and SPDL do instead of processes.

``make_loader(..., num_workers=0, prefetch_factor=k)`` wraps its DataLoader in `BatchesAhead`: a producer thread
of the main process iterates it (each batch decoded by the dataset's own threads, `labkit.datasets.batch_decode`)
while the training loop works on an earlier batch, at most ``k`` batches ahead. No process per worker, no batch
crossing between processes, no pickled dataset and no start-up; the decoders release the GIL, so the threads
decode in parallel. An error in the producer is raised where the loop is, and a loop that stops early leaves no
thread behind.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from labkit.core.errors import LabkitValueError

_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class BatchesAhead:
    """``loader`` (any iterable of batches) iterated by a producer thread, ``ahead`` batches before the loop asks."""

    def __init__(self, loader: Iterable, ahead: int) -> None:
        if ahead < 1:
            raise LabkitValueError(f"prefetch_factor={ahead}: at least 1 batch ahead")
        self.loader, self.batches_ahead = loader, ahead

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"BatchesAhead({self.loader!r}, ahead={self.batches_ahead})"

    def __iter__(self) -> Iterator[Any]:
        ready: queue.Queue[Any] = queue.Queue(maxsize=self.batches_ahead)
        stop = threading.Event()

        def produce() -> None:
            try:
                for batch in self.loader:
                    if stop.is_set():
                        return
                    ready.put(batch)
                ready.put(_DONE)
            except BaseException as error:  # the consumer re-raises it, with its traceback
                ready.put(_Failed(error))

        producer = threading.Thread(target=produce, name="labkit-thread-loader", daemon=True)
        producer.start()
        try:
            while True:
                item = ready.get()
                if item is _DONE:
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            stop.set()
            while producer.is_alive():  # unblock a producer waiting on a full queue, then let it end
                try:
                    ready.get(timeout=0.05)
                except queue.Empty:
                    pass
            producer.join()
