import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys

import pytest
from torch.utils.data import DataLoader

from labkit.datasets.iterable import LiveStreamDataset, ShardedIterableDataset, Stream
from labkit.harness.naive_datasets import NaiveIterableDataset
from labkit.storage.pack_format import PackWriter


def _records(batches):
    return [r for b in batches for r in (b if isinstance(b, list) else [b])]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return _write_shards(tmp_path_factory.mktemp("shards"), [7, 5, 9])


ALL = sorted(f"{s}-{k}" for s, size in enumerate([7, 5, 9]) for k in range(size))


def _decode(record):
    return record[0].decode()


def _iterate(dataset, workers):
    return _records(DataLoader(dataset, batch_size=None, num_workers=workers))


def _held_back(plan):
    return [f"{os.path.basename(shard)[6:-5]}-{index}" for shard, index in plan.held_back]


@pytest.mark.parametrize("workers,world", [(0, 1), (1, 1), (2, 1), (3, 1), (2, 2), (0, 4), (3, 2)])
def test_every_record_exactly_once_across_ranks_and_workers(shards, workers, world):
    seen, per_rank = [], []
    for rank in range(world):
        ds = ShardedIterableDataset(shards, decode=_decode, shuffle_buffer=4, seed=1, rank=rank, world_size=world)
        plan = ds.epoch_plan(workers)
        records = _iterate(ds, workers)
        assert ds.plans == [plan]  # what the workers iterated by is what the main process planned
        seen += records
        per_rank.append(len(records))
    held = _held_back(plan)
    assert len(set(seen)) == len(seen) and not set(seen) & set(held)  # yielded once; held back, not yielded
    assert sorted(seen + held) == ALL  # and nothing lost silently
    assert len(set(per_rank)) == 1 and len(held) < plan.consumers == world * max(1, workers)


UNEVEN = list(range(5, 24, 3))  # seven shards of 5, 8, ..., 23 records


@pytest.fixture(scope="module")
def uneven_shards(tmp_path_factory):
    return _write_shards(tmp_path_factory.mktemp("uneven"), UNEVEN)


def _write_shards(folder, sizes):
    paths = []
    for s, size in enumerate(sizes):
        path = str(folder / f"shard-{s}.pack")
        with PackWriter(path, ["a"]) as w:
            for k in range(size):
                w.add(f"{s}-{k}".encode(), 0, f"a/{s}-{k}")
        paths.append(path)
    return paths


@pytest.mark.parametrize("workers", [0, 2])
def test_uneven_shards_give_every_rank_the_same_count_and_hold_back_different_records_each_epoch(
    uneven_shards, workers
):
    total, held_by_epoch = sum(UNEVEN), []
    for epoch in range(2):
        seen = {}
        for rank in range(2):
            ds = ShardedIterableDataset(uneven_shards, decode=_decode, seed=3, rank=rank, world_size=2)
            ds.set_epoch(epoch)
            plan = ds.epoch_plan(workers)
            seen[rank] = _iterate(ds, workers)
        assert len(seen[0]) == len(seen[1]) == plan.per_consumer * max(1, workers), f"epoch {epoch}"
        everything = seen[0] + seen[1] + _held_back(plan)
        assert len(everything) == len(set(everything)) == total
        assert sum(plan.held_back_by_shard().values()) == len(plan.held_back) == total % plan.consumers
        held_by_epoch.append(set(_held_back(plan)))
    if held_by_epoch[0]:
        assert held_by_epoch[0] != held_by_epoch[1]
    assert "held back" in str(plan) or not plan.held_back


def test_repeat_mode_fills_the_short_ranks_and_loses_nothing(uneven_shards):
    seen = {}
    for rank in range(2):
        ds = ShardedIterableDataset(uneven_shards, decode=_decode, seed=3, rank=rank, world_size=2, balance="repeat")
        plan = ds.epoch_plan(2)
        seen[rank] = _iterate(ds, 2)
    everything = seen[0] + seen[1]
    assert len(seen[0]) == len(seen[1]) and set(everything) == {
        f"{s}-{k}" for s, n in enumerate(UNEVEN) for k in range(n)
    }
    assert len(everything) - len(set(everything)) == plan.repeated == 4 * 25 - sum(UNEVEN)
    assert plan.held_back == [] and "repeated" in str(plan)
    with pytest.raises(ValueError, match="balance"):
        ShardedIterableDataset(uneven_shards, balance="pad")


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


@pytest.mark.timeout(150)
def test_ddp_over_uneven_shards_finishes_two_epochs_under_torchrun(uneven_shards):
    """Without equal work per rank the rank with fewer batches leaves the epoch and the other waits in
    an all-reduce for ever: this run would hang until the timeout below."""
    child = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ddp_uneven_child.py")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        child,
        *uneven_shards,
    ]
    run = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )  # its own process group: a hang is killed whole
    try:
        stdout, stderr = run.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        stdout, stderr = run.communicate()
        pytest.fail(
            f"DDP over uneven shards hung for 120 s: a rank ran out of batches while the other waited in "
            f"an all-reduce.\n{stdout}{stderr}"
        )
    assert run.returncode == 0, stdout + stderr
    lines = [line for line in stdout.splitlines() if line.startswith("rank 0: ")]
    assert len(lines) == 1, stdout + stderr
    assert "all ranks [[12, 12], [12, 12]]" in lines[0]  # both ranks: 24 records per worker, 6 batches of 4 each


def test_a_spawned_worker_keeps_the_rank_of_the_process_that_pickled_it(shards, monkeypatch):
    import pickle

    import labkit.datasets.iterable as streaming

    ds = ShardedIterableDataset(shards)  # rank and world size left to torch.distributed
    monkeypatch.setattr(streaming, "rank_and_world", lambda rank, world: (1, 2))  # as under a process group
    copy = pickle.loads(pickle.dumps(ds))  # what a spawned worker receives
    assert (copy.rank, copy.world_size) == (1, 2)


def test_persistent_workers_move_on_after_an_epoch_cut_short(uneven_shards):
    ds = ShardedIterableDataset(uneven_shards, decode=_decode, seed=3, rank=0, world_size=1)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    firsts = []
    for _ in range(3):
        for k, record in enumerate(loader):
            if k == 0:
                firsts.append(record)
            if k == 9:
                break
    assert [plan.epoch for plan in ds.plans] == [0, 1, 2]
    assert len(set(firsts)) == 3  # a new order each epoch


def test_fewer_records_than_consumers_is_an_error_when_holding_back(shards, tmp_path):
    tiny = _write_shards(tmp_path, [3])
    with pytest.raises(ValueError, match="balance='repeat'"):
        ShardedIterableDataset(tiny, rank=0, world_size=2).epoch_plan(num_workers=2)
    plan = ShardedIterableDataset(tiny, rank=0, world_size=2, balance="repeat").epoch_plan(num_workers=2)
    assert plan.per_consumer == 1 and plan.repeated == 1


def test_an_empty_shard_among_others_changes_nothing(tmp_path):
    paths = _write_shards(tmp_path, [4, 0, 5])
    seen = []
    for rank in range(2):
        seen += _iterate(ShardedIterableDataset(paths, decode=_decode, rank=rank, world_size=2), 0)
    plan = ShardedIterableDataset(paths, rank=0, world_size=2).epoch_plan()
    assert len(seen) == len(set(seen)) == 8 and len(plan.held_back) == 1
