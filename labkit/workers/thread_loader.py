"""A loader with no worker processes: batches decoded by threads of the main process, one batch ahead.

FFCV's loader works so: no process per worker, no batch crossing from one process to another, no pickled
dataset and no worker start-up; the decoders release the GIL, so threads decode in parallel. Here a
producer thread asks the dataset for each batch (`labkit.datasets.batch_decode`: every core's thread
decodes its rows straight into the batch tensor) while the training loop works on the previous one,
``prefetch`` batches ahead at most. Whether it beats process workers depends on how much of a sample's
time holds the GIL: `labkit.diagnose.autotuner` measures both and keeps the faster.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator, Optional

import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler, SequentialSampler

from labkit.collate.batching import stack_uint8
from labkit.core.cpus import cpu_budget
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.datasets.map_style import LabeledImageDataset

_DONE = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class ThreadLoader:
    """Batches ``(uint8 B×3×H×W, int64 labels)`` of a labkit image dataset, decoded by ``threads`` threads of
    this process (default: the rank's CPUs, `labkit.core.cpus`). Iterate it, and ``len()`` it, as a DataLoader."""

    def __init__(self, dataset: LabeledImageDataset, batch_size: int = 64, shuffle: bool = True,
                 sampler: Optional[Sampler] = None, drop_last: bool = False, threads: Optional[int] = None,
                 prefetch: int = 2, collate_fn: Optional[Callable] = None, pin_memory: Optional[bool] = None,
                 generator: Optional[torch.Generator] = None) -> None:
        if not getattr(dataset, "fills_batches", False):
            raise LabkitTypeError("ThreadLoader needs a labkit image dataset that decodes whole batches (ImageFolderDataset, "
                                  f"PackedDataset, DecodedArrayDataset), not {type(dataset).__name__}: use torch's "
                                  "DataLoader for other datasets")
        if prefetch < 1:
            raise LabkitValueError(f"prefetch={prefetch}: at least 1 batch ahead")
        if sampler is not None and shuffle:
            raise LabkitValueError("sampler and shuffle=True together: the sampler decides the order; pass "
                                   "shuffle=False with it (as torch's DataLoader requires)")
        self.dataset = dataset
        self.threads = threads or cpu_budget().decode_threads(0)
        dataset.decode_threads = self.threads
        order = sampler or (RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset))
        self.batch_sampler = BatchSampler(order, batch_size, drop_last)
        self.batch_size = batch_size
        self.prefetch = prefetch
        self.collate_fn = collate_fn or stack_uint8
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __repr__(self) -> str:
        return (f"ThreadLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, threads={self.threads}, "
                f"prefetch={self.prefetch})")

    def _batch(self, indices: Any) -> Any:
        batch = self.collate_fn(self.dataset.__getitems__(indices))
        if self.pin_memory:
            batch = tuple(t.pin_memory() if isinstance(t, torch.Tensor) else t for t in batch)
        return batch

    def __iter__(self) -> Iterator[Any]:
        ready: "queue.Queue[Any]" = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def produce() -> None:
            try:
                for indices in self.batch_sampler:
                    if stop.is_set():
                        return
                    ready.put(self._batch(indices))
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
