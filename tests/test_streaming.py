import multiprocessing as mp
import queue

import pytest
from torch.utils.data import DataLoader

from labkit.packfile import PackWriter
from labkit.streaming import LiveStreamDataset, NaiveIterableDataset, ShardedIterableDataset, Stream


def _records(batches):
    return [r for b in batches for r in (b if isinstance(b, list) else [b])]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    paths = []
    for s, size in enumerate([7, 5, 9]):
        path = str(tmp_path_factory.mktemp("shards") / f"shard-{s}.pack")
        with PackWriter(path, ["a"]) as w:
            for k in range(size):
                w.add(f"{s}-{k}".encode(), 0, f"a/{s}-{k}")
        paths.append(path)
    return paths


ALL = sorted(f"{s}-{k}" for s, size in enumerate([7, 5, 9]) for k in range(size))


def _decode(record):
    return record[0].decode()


def _iterate(dataset, workers):
    return _records(DataLoader(dataset, batch_size=None, num_workers=workers))


@pytest.mark.parametrize("workers,world", [(0, 1), (1, 1), (2, 1), (3, 1), (2, 2), (0, 4), (3, 2)])
def test_every_record_exactly_once_across_ranks_and_workers(shards, workers, world):
    seen = []
    for rank in range(world):
        ds = ShardedIterableDataset(shards, decode=_decode, shuffle_buffer=4, seed=1, rank=rank, world_size=world)
        seen += _iterate(ds, workers)
    assert sorted(seen) == ALL


def _log_lines():
    return (f"line-{k}" for k in range(11))


def test_callable_shards_split_when_fewer_than_consumers_and_length_is_unknown():
    ds = ShardedIterableDataset([_log_lines], rank=0, world_size=1)
    assert sorted(_iterate(ds, 3)) == sorted(f"line-{k}" for k in range(11))
    with pytest.raises(TypeError, match="length unknown"):
        len(ds)


def test_known_length_and_order_changes_with_epoch(shards):
    ds = ShardedIterableDataset(shards, decode=_decode, shuffle_buffer=8, seed=2, rank=0, world_size=1)
    assert len(ds) == len(ALL)
    first = _iterate(ds, 0)
    ds.set_epoch(1)
    second = _iterate(ds, 0)
    assert sorted(first) == sorted(second) == ALL and first != second


def test_naive_iterable_duplicates_records_per_worker():
    seen = _iterate(NaiveIterableDataset(_log_lines), 2)
    assert len(seen) == 22 and all(count == 2 for count in map(seen.count, set(seen)))


def _produce(stream, n):
    for k in range(n):
        stream.put(k)
    stream.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_live_stream_loses_and_duplicates_nothing_and_ends_when_the_producer_stops(workers):
    stream = Stream(maxsize=4)
    producer = mp.Process(target=_produce, args=(stream, 200))
    producer.start()
    got = _iterate(LiveStreamDataset(stream, poll_s=0.1), workers)
    producer.join(timeout=10)
    assert sorted(got) == list(range(200)) and producer.exitcode == 0


def test_live_stream_buffer_is_bounded():
    stream = Stream(maxsize=2)
    stream.put(1)
    stream.put(2)
    with pytest.raises(queue.Full):
        stream.put(3, timeout=0.2)  # the producer waits for the consumer: back-pressure
    with pytest.raises(TypeError, match="length unknown"):
        len(LiveStreamDataset(stream))
