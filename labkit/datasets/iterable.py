"""Iterable datasets over shards and live streams (article section 4.2).

An ``IterableDataset`` is copied into every DataLoader worker and every rank; each copy runs ``__iter__`` from the
start. Unless the dataset splits the work itself, every record comes out ``num_workers × world_size`` times —
`NaiveIterableDataset` is that bug, kept to show it. `ShardedIterableDataset` splits by (rank, worker) so each record
comes out exactly once per epoch, and every rank gets the same number of records (a rank that runs short hangs DDP);
`LiveStreamDataset` reads records another process produces, through a bounded queue, and ends the epoch cleanly when the
producer stops.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Union

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from labkit.core.environment import consumer_slot, rank_and_world
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.shared_log import SharedLog
from labkit.storage.pack_format import PackReader

Record = tuple[Any, int]
ShardSource = Union[str, "os.PathLike[str]", Callable[[], Iterable[Any]]]


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
class _Split:
    order: np.ndarray  # shard indices in the epoch's order
    lengths: list[int]  # their record counts, in that order
    total: int
    offset: int  # where the rotated sequence starts
    each: int  # records per consumer


@dataclass(frozen=True)
class EpochPlan:
    """How one epoch of pack shards is split over its consumers (ranks × DataLoader workers):
    every consumer yields ``per_consumer`` records, so every rank runs the same number of steps."""

    epoch: int
    consumers: int
    per_consumer: int
    total: int
    held_back: list[tuple[str, int]]  # (shard, record index) not yielded this epoch ("hold_back")
    repeated: int  # records yielded twice to fill the short consumers ("repeat")

    def held_back_by_shard(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for shard, _ in self.held_back:
            counts[shard] = counts.get(shard, 0) + 1
        return counts

    def __str__(self) -> str:
        text = f"epoch {self.epoch}: {self.total} records over {self.consumers} consumers, {self.per_consumer} each"
        if self.held_back:
            shards = ", ".join(f"{os.path.basename(k)}: {v}" for k, v in sorted(self.held_back_by_shard().items()))
            text += f"; {len(self.held_back)} held back ({shards}), drawn anew each epoch"
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
      comes out exactly once; `epoch_plan` and `plans` say how many and from which shards. The
      rotation is drawn anew each epoch, so a record is held back in an epoch with probability
      (held back / total) and none is left out for good. Costs a few records an epoch; fewer
      records than consumers is an error (each consumer would yield none).
    * ``"repeat"``: the short consumers repeat records from the start of the sequence, as
      ``DistributedSampler`` pads — every record is seen each epoch, a few of them twice.

    Both are deterministic per (seed, epoch). **Callable shards** have no known length — and one
    callable among pack shards turns balancing off for all of them: each consumer reads whole
    shards (or, with fewer shards than consumers, every C-th record), so ranks can get unequal
    counts. Under DDP, end each epoch with a fixed step count, or use
    ``torch.distributed.algorithms.join.Join`` so an early rank does not hang the others.

    ``len(ds)`` is the number of records in all shards, over all ranks; a rank yields
    ``epoch_plan(num_workers).per_consumer × num_workers`` of them.

    Call ``set_epoch(epoch)`` before each epoch (as with ``DistributedSampler``); with
    ``persistent_workers=True`` the copies inside the workers also advance by themselves, at
    the start of each iteration.
    """

    def __init__(
        self,
        shards: Sequence[ShardSource],
        decode: Callable[[Any], Any] | None = None,
        shuffle_buffer: int = 0,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        balance: str = "hold_back",
    ) -> None:
        if not shards:
            raise LabkitValueError("ShardedIterableDataset needs at least one shard")
        if balance not in BALANCE:
            raise LabkitValueError(f"balance must be one of {BALANCE}, got {balance!r}")
        self.shards = list(shards)
        self.decode, self.shuffle_buffer, self.seed = decode, shuffle_buffer, seed
        self.rank, self.world_size, self.balance = rank, world_size, balance
        self.epoch = 0
        self._lengths: list[int] | None = None
        self._plans = SharedLog("labkit-plans-") if self._balanced else None

    @property
    def _balanced(self) -> bool:
        return not any(callable(s) for s in self.shards)

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s shard order next (with persistent workers, before the workers start)."""
        self.epoch = epoch

    def _shard_lengths(self) -> list[int]:
        if self._lengths is None:
            self._lengths = [len(PackReader(s)) for s in self.shards]
        return self._lengths

    def __len__(self) -> int:
        if not self._balanced:
            raise LabkitTypeError("length unknown: this dataset streams from callables; iterate it to the end instead")
        return sum(self._shard_lengths())

    def _split(self, consumers: int, epoch: int) -> _Split:
        """The epoch's record sequence (shards in the epoch's order, rotated by a seeded offset) and the
        length of each consumer's run of it, all from (seed, epoch)."""
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.shards))
        lengths = self._shard_lengths()
        total = sum(lengths)
        offset = int(rng.integers(total)) if total else 0
        each = total // consumers if self.balance == "hold_back" else -(-total // consumers)
        if total and not each:
            raise LabkitValueError(
                f"{total} records cannot give each of {consumers} consumers (ranks x workers) even one "
                "with balance='hold_back': use fewer workers, or balance='repeat'"
            )
        return _Split(order, [lengths[k] for k in order], total, offset, each)

    def _run(self, split: _Split, start: int, length: int) -> Iterator[tuple[int, int]]:
        """(shard, record index) of ``length`` records from position ``start`` of the sequence, wrapping
        round at its end: a few contiguous ranges of a few shards, walked lazily."""
        if length <= 0:
            return
        position, left = start % split.total, length
        bounds = np.concatenate([[0], np.cumsum(split.lengths)])
        while left > 0:
            slot = int(np.searchsorted(bounds, position, side="right")) - 1
            take = min(left, int(bounds[slot + 1]) - position)
            shard, first = int(split.order[slot]), position - int(bounds[slot])
            yield from ((shard, i) for i in range(first, first + take))
            left -= take
            position = (position + take) % split.total

    def epoch_plan(self, num_workers: int = 0) -> EpochPlan:
        """The split of the next epoch for this dataset's world size and ``num_workers`` DataLoader workers."""
        return self._plan(num_workers, self.epoch)

    def _plan(self, num_workers: int, epoch: int) -> EpochPlan:
        if not self._balanced:
            raise LabkitTypeError("callable shards have no known length, so no epoch can be planned")
        consumers = rank_and_world(self.rank, self.world_size)[1] * max(1, num_workers)
        split = self._split(consumers, epoch)
        rest = max(0, split.total - split.each * consumers)
        held = [
            (os.fspath(self.shards[s]), i) for s, i in self._run(split, split.offset + consumers * split.each, rest)
        ]
        return EpochPlan(epoch, consumers, split.each, split.total, held, max(0, split.each * consumers - split.total))

    @property
    def plans(self) -> list[EpochPlan]:
        """The plans this rank's consumers iterated by, one per epoch (logged by worker 0)."""
        if self._plans is None:
            return []
        return [EpochPlan(**{**r, "held_back": [tuple(h) for h in r["held_back"]]}) for r in self._plans.records()]

    def _pack_records(self, consumer: int, consumers: int, epoch: int) -> Iterator[Any]:
        split = self._split(consumers, epoch)
        opened: dict[int, _PackShard] = {}
        for shard, index in self._run(split, split.offset + consumer * split.each, split.each):
            if shard not in opened:
                opened[shard] = _PackShard(self.shards[shard])
            yield opened[shard].record(index)

    def _callable_records(self, consumer: int, consumers: int, epoch: int) -> Iterator[Any]:
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.shards))
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

    def __getstate__(self) -> dict[str, Any]:
        # Resolved here, in the process that pickles the dataset for a spawned worker: the worker has no
        # process group, and would take itself for rank 0 of 1.
        state = dict(self.__dict__)
        state["rank"], state["world_size"] = rank_and_world(self.rank, self.world_size)
        return state

    def __iter__(self) -> Iterator[Any]:
        # The epoch advances when an iteration starts, not when it ends: a persistent worker whose epoch
        # was cut short (a fixed step count) still moves on to the next order.
        epoch, self.epoch = self.epoch, self.epoch + 1
        consumer, consumers = consumer_slot(self.rank, self.world_size)
        if self._balanced:
            info = get_worker_info()
            if self._plans is not None and (info is None or info.id == 0):
                self._plans.append(asdict(self._plan(info.num_workers if info else 0, epoch)))
            records = self._pack_records(consumer, consumers, epoch)
        else:
            records = self._callable_records(consumer, consumers, epoch)
        if self.shuffle_buffer > 1:
            rng = np.random.default_rng([self.seed, epoch, consumer])
            records = _shuffled(records, self.shuffle_buffer, rng)
        for record in records:
            yield self.decode(record) if self.decode else record


def _shuffled(records: Iterable[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
    buffer: list[Any] = []
    for record in records:
        if len(buffer) < size:
            buffer.append(record)
            continue
        k = int(rng.integers(size))
        yield buffer[k]
        buffer[k] = record
    rng.shuffle(buffer)
    yield from buffer


# -- live streams ----------------------------------------------------------------------------------------------

_END = "__labkit_end_of_stream__"


class LiveStreamDataset(IterableDataset):
    """Records that another process produces while training runs (online learning, article §4.2).

    The producer puts records into ``stream.queue`` (bounded: a full buffer blocks the
    producer — back-pressure) and calls ``stream.close()`` when done. Each record goes to
    exactly one consumer, whatever the number of workers; the epoch ends when the producer
    closes the stream. Make the `Stream` before building the DataLoader,
    so workers inherit its queue.
    """

    def __init__(self, stream: Stream, decode: Callable[[Any], Any] | None = None, poll_s: float = 0.5) -> None:
        self.stream, self.decode, self.poll_s = stream, decode, poll_s

    def __len__(self) -> int:
        raise LabkitTypeError("length unknown: a live stream ends when its producer closes it")

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

    def __init__(self, maxsize: int = 64, context: str | None = None) -> None:
        self.queue = mp.get_context(context).Queue(maxsize)

    def put(self, record: Any, timeout: float | None = None) -> None:
        """Blocks while the buffer is full: the consumer sets the pace."""
        self.queue.put(record, timeout=timeout)

    def close(self) -> None:
        self.queue.put(_END)
