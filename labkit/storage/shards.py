"""Where a stream's records come from, for the streaming and distributed labs (article §4.2, 4.4).

A stream is stored as **shards**: many files, each read front to back. `split_pack` cuts one
pack into shard packs of the sizes asked (real shards are rarely equal), `pack_records` reads
one shard as a record stream (a callable shard for `labkit.datasets.iterable.ShardedIterableDataset`,
which then hands out whole shards), `record_key` names a record by its content so records can
be counted across workers and ranks without decoding them (`record_key_and_worker` adds the
worker that read it), and `feed_stream` is a producer
process for a live `labkit.datasets.iterable.Stream` that notes when it made each record.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import get_worker_info

from labkit.core.errors import LabkitValueError
from labkit.core.string_table import PathLike
from labkit.core.timing import timestamp
from labkit.storage.pack_format import PackError, PackReader, PackWriter

Record = tuple[bytes, int]


def _is_slice_of(shard: str, source: PackReader, start: int, size: int) -> bool:
    try:
        reader = PackReader(shard)
    except (OSError, PackError):
        return False
    expected = source.records["crc32"][start : start + size]
    return len(reader) == size and np.array_equal(reader.records["crc32"], expected)


def split_pack(pack: PathLike, out_dir: PathLike, sizes: Sequence[int], prefix: str = "shard") -> list[str]:
    """Cut ``pack`` into consecutive shard packs of ``sizes`` records: ``out_dir/shard-00.pack``, ...

    Records keep their bytes, labels and paths. Shards already there holding the same records
    (by checksum) are kept, so a notebook can call this on every run. The sizes may add up to
    less than the pack (the rest is left out), never to more.
    """
    source = PackReader(pack)
    sizes = [int(s) for s in sizes]
    if any(s < 1 for s in sizes) or sum(sizes) > len(source):
        raise LabkitValueError(
            f"{os.fspath(pack)}: shard sizes {sizes} must be >= 1 and add up to at most its {len(source)} records"
        )
    os.makedirs(out_dir, exist_ok=True)
    paths, start = [], 0
    for k, size in enumerate(sizes):
        path = os.path.join(os.fspath(out_dir), f"{prefix}-{k:02d}.pack")
        if not _is_slice_of(path, source, start, size):
            with PackWriter(path, source.classes, decoded_shape=source.decoded_shape) as writer:
                for i in range(start, start + size):
                    writer.add(
                        source.view(i)
                        if source.decoded_shape is None
                        else source.view(i).reshape(source.decoded_shape),
                        int(source.labels[i]),
                        source.paths[i],
                    )
        paths.append(path)
        start += size
    return paths


def pack_records(path: PathLike) -> Iterator[Record]:
    """Every record of one pack, in stored order, as (bytes, label): a shard read as a stream.

    ``functools.partial(pack_records, path)`` is a callable shard that pickles into workers.
    """
    reader = PackReader(path)
    for i in range(len(reader)):
        yield reader.read(i), int(reader.labels[i])


def record_key(record: Record) -> int:
    """A record's identity: the CRC32 of its bytes, the same number its pack stores in ``records["crc32"]``."""
    return zlib.crc32(record[0])


def record_key_and_worker(record: Record) -> tuple[int, int]:
    """(`record_key`, the DataLoader worker that read the record; 0 in the main process): who yielded what."""
    info = get_worker_info()
    return record_key(record), info.id if info else 0


def feed_stream(stream: Any, n: int, per_second: float) -> None:
    """Produce ``n`` records ``(k, made_at)`` at up to ``per_second`` into ``stream``, then close it.

    ``made_at`` is the time stamp (`labkit.core.timing.timestamp`) when record ``k`` was made, so the consumer can tell
    how long the producer was held back: a full buffer blocks ``stream.put`` (back-pressure), and the next record is
    made only after the put returns. Runs in its own process.
    """
    interval = 1.0 / per_second
    next_at = timestamp()
    for k in range(n):
        delay = next_at - timestamp()
        if delay > 0:
            time.sleep(delay)
        stream.put((k, timestamp()))
        next_at = max(next_at + interval, timestamp())
    stream.close()
