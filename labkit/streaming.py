"""Iterable datasets over shards and live streams (seed section 4.2).

An ``IterableDataset`` is copied into every DataLoader worker and every rank; each copy runs
``__iter__`` from the start. Unless the dataset splits the work itself, every record comes
out ``num_workers × world_size`` times — `NaiveIterableDataset` is that bug, kept to show it.
`ShardedIterableDataset` splits by (rank, worker) so each record comes out exactly once
per epoch; `LiveStreamDataset` reads records another process produces, through a bounded
queue, and ends the epoch cleanly when the producer stops.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from labkit.packfile import PackReader

Record = Tuple[Any, int]
ShardSource = Union[str, "os.PathLike[str]", Callable[[], Iterable[Any]]]


def consumer_slot(rank: Optional[int] = None, world_size: Optional[int] = None) -> Tuple[int, int]:
    """(this consumer's id, number of consumers) over every rank × DataLoader worker."""
    if rank is None or world_size is None:
        import torch.distributed as dist

        ready = dist.is_available() and dist.is_initialized()
        rank = (dist.get_rank() if ready else 0) if rank is None else rank
        world_size = (dist.get_world_size() if ready else 1) if world_size is None else world_size
    info = get_worker_info()
    workers, worker = (info.num_workers, info.id) if info else (1, 0)
    return rank * workers + worker, world_size * workers


class _PackShard:
    """A pack file as a shard: its records, by index, as (bytes, label)."""

    def __init__(self, path: Any) -> None:
        self.reader = PackReader(path)

    def __len__(self) -> int:
        return len(self.reader)

    def record(self, i: int) -> Record:
        return self.reader.read(i), int(self.reader.labels[i])


class ShardedIterableDataset(IterableDataset):
    """Records of many shards, each produced exactly once per epoch across ranks × workers.

    ``shards`` are pack files, or zero-argument callables that return an iterable of
    records (a file of a log, a partition of a table). With at least as many shards as
    consumers, each consumer reads whole shards; with fewer, every consumer walks every
    shard and keeps every C-th record (pack shards jump straight to their records). Shard
    order is shuffled per epoch with ``seed`` (the same in every copy, so the split stays
    consistent), then records pass through a shuffle buffer of ``shuffle_buffer`` records.
    ``decode`` maps each record, e.g. ``lambda r: (decode(r[0]), r[1])``.

    Call ``set_epoch(epoch)`` before each epoch (as with ``DistributedSampler``); with
    ``persistent_workers=True`` the copies inside the workers also advance by themselves.
    """

    def __init__(self, shards: Sequence[ShardSource], decode: Optional[Callable[[Any], Any]] = None,
                 shuffle_buffer: int = 0, seed: int = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None) -> None:
        if not shards:
            raise ValueError("ShardedIterableDataset needs at least one shard")
        self.shards = list(shards)
        self.decode, self.shuffle_buffer, self.seed = decode, shuffle_buffer, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        if any(callable(s) for s in self.shards):
            raise TypeError("length unknown: this dataset streams from callables; iterate it to the end instead")
        return sum(len(PackReader(s)) for s in self.shards)

    def _records(self, consumer: int, consumers: int) -> Iterator[Any]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.shards))
        shards = [self.shards[k] for k in order]
        if len(shards) >= consumers:
            for source in shards[consumer::consumers]:
                if callable(source):
                    yield from source()
                else:
                    shard = _PackShard(source)
                    yield from (shard.record(i) for i in range(len(shard)))
            return
        for source in shards:  # fewer shards than consumers: split every shard record by record
            if callable(source):
                for k, record in enumerate(source()):
                    if k % consumers == consumer:
                        yield record
            else:
                shard = _PackShard(source)
                yield from (shard.record(i) for i in range(consumer, len(shard), consumers))

    def __iter__(self) -> Iterator[Any]:
        consumer, consumers = consumer_slot(self.rank, self.world_size)
        records = self._records(consumer, consumers)
        if self.shuffle_buffer > 1:
            rng = np.random.default_rng([self.seed, self.epoch, consumer])
            records = _shuffled(records, self.shuffle_buffer, rng)
        for record in records:
            yield self.decode(record) if self.decode else record
        self.epoch += 1


def _shuffled(records: Iterable[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
    buffer: List[Any] = []
    for record in records:
        if len(buffer) < size:
            buffer.append(record)
            continue
        k = int(rng.integers(size))
        yield buffer[k]
        buffer[k] = record
    rng.shuffle(buffer)
    yield from buffer


class NaiveIterableDataset(IterableDataset):
    """The bug of seed 4.2, on purpose: every worker iterates every record (duplicates ×num_workers)."""

    def __init__(self, records: Callable[[], Iterable[Any]]) -> None:
        self.records = records

    def __iter__(self) -> Iterator[Any]:
        return iter(self.records())


# -- live streams ----------------------------------------------------------------------------------------------

_END = "__labkit_end_of_stream__"


class LiveStreamDataset(IterableDataset):
    """Records that another process produces while training runs (online learning, seed 4.2).

    The producer puts records into ``stream.queue`` (bounded: a full buffer blocks the
    producer — back-pressure) and calls ``stream.close()`` when done. Each record goes to
    exactly one consumer, whatever the number of workers; the epoch ends when the producer
    closes the stream. Make the `Stream` before building the DataLoader,
    so workers inherit its queue.
    """

    def __init__(self, stream: "Stream", decode: Optional[Callable[[Any], Any]] = None,
                 poll_s: float = 0.5) -> None:
        self.stream, self.decode, self.poll_s = stream, decode, poll_s

    def __len__(self) -> int:
        raise TypeError("length unknown: a live stream ends when its producer closes it")

    def __iter__(self) -> Iterator[Any]:
        q = self.stream.queue
        while True:
            try:
                record = q.get(timeout=self.poll_s)
            except queue.Empty:
                continue
            if isinstance(record, str) and record == _END:
                q.put(_END)  # pass the end on to the next consumer
                return
            yield self.decode(record) if self.decode else record


class Stream:
    """A bounded multiprocessing queue with an end marker: the producer's side of a live stream."""

    def __init__(self, maxsize: int = 64, context: Optional[str] = None) -> None:
        self.queue = mp.get_context(context).Queue(maxsize)

    def put(self, record: Any, timeout: Optional[float] = None) -> None:
        """Blocks while the buffer is full: the consumer sets the pace."""
        self.queue.put(record, timeout=timeout)

    def close(self) -> None:
        self.queue.put(_END)

