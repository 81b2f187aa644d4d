"""Iterable datasets over shards and live streams (seed section 4.2).

An ``IterableDataset`` is copied into every DataLoader worker and every rank; each copy runs
``__iter__`` from the start. Unless the dataset splits the work itself, every record comes
out ``num_workers × world_size`` times — `NaiveIterableDataset` is that bug, kept to show it.
`ShardedIterableDataset` splits by (rank, worker) so each record comes out exactly once
per epoch, and every rank gets the same number of records (a rank that runs short hangs DDP); `LiveStreamDataset` reads records another process produces, through a bounded
queue, and ends the epoch cleanly when the producer stops.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from labkit.eventlog import SharedLog
from labkit.packfile import PackReader

Record = Tuple[Any, int]
ShardSource = Union[str, "os.PathLike[str]", Callable[[], Iterable[Any]]]


def rank_and_world(rank: Optional[int] = None, world_size: Optional[int] = None) -> Tuple[int, int]:
    """(rank, world size): as given, else from torch.distributed when it is initialised, else (0, 1)."""
    if rank is None or world_size is None:
        import torch.distributed as dist

        ready = dist.is_available() and dist.is_initialized()
        rank = (dist.get_rank() if ready else 0) if rank is None else rank
        world_size = (dist.get_world_size() if ready else 1) if world_size is None else world_size
    return rank, world_size


def consumer_slot(rank: Optional[int] = None, world_size: Optional[int] = None) -> Tuple[int, int]:
    """(this consumer's id, number of consumers) over every rank × DataLoader worker."""
    rank, world_size = rank_and_world(rank, world_size)
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

    def records(self) -> Iterator[Record]:
        return (self.record(i) for i in range(len(self)))


BALANCE = ("hold_back", "repeat")


@dataclass(frozen=True)
class EpochPlan:
    """How one epoch of pack shards is split over its consumers (ranks × DataLoader workers):
    every consumer yields ``per_consumer`` records, so every rank runs the same number of steps."""

    epoch: int
    consumers: int
    per_consumer: int
    total: int
    held_back: List[Tuple[str, int]]  # (shard, record index) not yielded this epoch ("hold_back")
    repeated: int  # records yielded twice to fill the short consumers ("repeat")

    def held_back_by_shard(self) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        for shard, _ in self.held_back:
            counts[shard] = counts.get(shard, 0) + 1
        return counts

    def __str__(self) -> str:
        text = (f"epoch {self.epoch}: {self.total} records over {self.consumers} consumers, "
                f"{self.per_consumer} each")
        if self.held_back:
            shards = ", ".join(f"{os.path.basename(k)}: {v}" for k, v in sorted(self.held_back_by_shard().items()))
            text += f"; {len(self.held_back)} held back ({shards}), different ones next epoch"
        if self.repeated:
            text += f"; {self.repeated} repeated to fill the short consumers"
        return text


class ShardedIterableDataset(IterableDataset):
    """Records of many shards, each produced exactly once per epoch across ranks × workers.

    ``shards`` are pack files, or zero-argument callables that return an iterable of
    records (a file of a log, a partition of a table). Shard order is shuffled per epoch with
    ``seed`` (the same in every copy, so the split stays consistent), then records pass through
    a shuffle buffer of ``shuffle_buffer`` records. ``decode`` maps each record, e.g.
    ``lambda r: (decode(r[0]), r[1])``.

    **Equal work per rank (pack shards).** Under DistributedDataParallel a rank that runs out of
    batches first leaves the epoch while the others wait for it in an all-reduce: the job hangs.
    Pack shards know their lengths, so the epoch's records (shards in the epoch's order, one
    sequence rotated by a seeded offset) are cut into equal contiguous runs, one per consumer
    (rank × worker); every rank then yields the same records count, and the same number of
    batches for the same batch size and worker count. Records that do not divide evenly (fewer
    than the number of consumers) are dealt with by ``balance``:

    * ``"hold_back"`` (default): they are not yielded this epoch — every yielded record still
      comes out exactly once; `epoch_plan` and `plans` say how many and from which shards, and
      the rotation makes them different records the next epoch. Costs a few records an epoch.
    * ``"repeat"``: the short consumers repeat records from the start of the sequence, as
      ``DistributedSampler`` pads — every record is seen each epoch, a few of them twice.

    Both are deterministic per (seed, epoch). **Callable shards** have no known length: each
    consumer reads whole shards (or, with fewer shards than consumers, every C-th record), so
    ranks can get unequal counts — under DDP, end each epoch with a fixed step count, or use
    ``torch.distributed.algorithms.join.Join`` so an early rank does not hang the others.

    Call ``set_epoch(epoch)`` before each epoch (as with ``DistributedSampler``); with
    ``persistent_workers=True`` the copies inside the workers also advance by themselves.
    """

    def __init__(self, shards: Sequence[ShardSource], decode: Optional[Callable[[Any], Any]] = None,
                 shuffle_buffer: int = 0, seed: int = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None, balance: str = "hold_back") -> None:
        if not shards:
            raise ValueError("ShardedIterableDataset needs at least one shard")
        if balance not in BALANCE:
            raise ValueError(f"balance must be one of {BALANCE}, got {balance!r}")
        self.shards = list(shards)
        self.decode, self.shuffle_buffer, self.seed = decode, shuffle_buffer, seed
        self.rank, self.world_size, self.balance = rank, world_size, balance
        self.epoch = 0
        self._lengths: Optional[List[int]] = None
        self._plans = SharedLog("labkit-plans-") if self._balanced else None

    @property
    def _balanced(self) -> bool:
        return not any(callable(s) for s in self.shards)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _shard_lengths(self) -> List[int]:
        if self._lengths is None:
            self._lengths = [len(PackReader(s)) for s in self.shards]
        return self._lengths

    def __len__(self) -> int:
        if not self._balanced:
            raise TypeError("length unknown: this dataset streams from callables; iterate it to the end instead")
        return sum(self._shard_lengths())

    def _epoch_order(self) -> Tuple[np.ndarray, int]:
        """The epoch's shard order and the rotation of its record sequence, from (seed, epoch)."""
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.shards))
        total = sum(self._shard_lengths())
        return order, int(rng.integers(total)) if total else 0

    def _positions(self, consumer: int, consumers: int) -> np.ndarray:
        """Positions in the epoch's rotated record sequence that ``consumer`` yields."""
        total = sum(self._shard_lengths())
        each = total // consumers if self.balance == "hold_back" else -(-total // consumers)
        _, offset = self._epoch_order()
        return (offset + consumer * each + np.arange(each)) % max(total, 1)

    def _locate(self, positions: np.ndarray) -> List[Tuple[int, int]]:
        """Sequence positions → (shard, record index) in the epoch's shard order."""
        order, _ = self._epoch_order()
        lengths = np.asarray(self._shard_lengths())[order]
        starts = np.concatenate([[0], np.cumsum(lengths)])
        slot = np.searchsorted(starts, positions, side="right") - 1
        return [(int(order[k]), int(p - starts[k])) for k, p in zip(slot, positions)]

    def epoch_plan(self, num_workers: int = 0) -> EpochPlan:
        """This epoch's split for this dataset's world size and ``num_workers`` DataLoader workers."""
        if not self._balanced:
            raise TypeError("callable shards have no known length, so no epoch can be planned")
        _, world_size = rank_and_world(self.rank, self.world_size)
        consumers = world_size * max(1, num_workers)
        total = sum(self._shard_lengths())
        each = len(self._positions(0, consumers))
        held: List[Tuple[str, int]] = []
        if self.balance == "hold_back" and total > each * consumers:
            _, offset = self._epoch_order()
            rest = (offset + consumers * each + np.arange(total - each * consumers)) % total
            held = [(os.fspath(self.shards[s]), i) for s, i in self._locate(rest)]
        return EpochPlan(self.epoch, consumers, each, total, held, max(0, each * consumers - total))

    @property
    def plans(self) -> List[EpochPlan]:
        """The plans this rank's consumers iterated by, one per epoch (logged by worker 0)."""
        if self._plans is None:
            return []
        return [EpochPlan(**{**r, "held_back": [tuple(h) for h in r["held_back"]]}) for r in self._plans.records()]

    def _pack_records(self, consumer: int, consumers: int) -> Iterator[Any]:
        opened: Dict[int, _PackShard] = {}
        for shard, index in self._locate(self._positions(consumer, consumers)):
            if shard not in opened:
                opened[shard] = _PackShard(self.shards[shard])
            yield opened[shard].record(index)

    def _callable_records(self, consumer: int, consumers: int) -> Iterator[Any]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.shards))
        shards = [self.shards[k] for k in order]
        if len(shards) >= consumers:
            for source in shards[consumer::consumers]:
                yield from (source() if callable(source) else _PackShard(source).records())
            return
        for source in shards:  # fewer shards than consumers: split every shard record by record
            if callable(source):
                yield from (record for k, record in enumerate(source()) if k % consumers == consumer)
            else:
                shard = _PackShard(source)
                yield from (shard.record(i) for i in range(consumer, len(shard), consumers))

    def __iter__(self) -> Iterator[Any]:
        consumer, consumers = consumer_slot(self.rank, self.world_size)
        if self._balanced:
            info = get_worker_info()
            if self._plans is not None and (info is None or info.id == 0):
                self._plans.append(asdict(self.epoch_plan(info.num_workers if info else 0)))
            records = self._pack_records(consumer, consumers)
        else:
            records = self._callable_records(consumer, consumers)
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

