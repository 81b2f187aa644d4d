import functools
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from torch.utils.data import DataLoader

from labkit.core.timing import timestamp
from labkit.datasets.iterable import LiveStreamDataset, ShardedIterableDataset, Stream
from labkit.storage.pack_format import PackReader, PackWriter
from labkit.storage.shards import feed_stream, pack_records, record_key, record_key_and_worker, split_pack


def _write_pack(path, n):
    with PackWriter(path, ["a", "b"]) as w:
        for k in range(n):
            w.add(f"record-{k}".encode() * (k + 1), k % 2, f"x/{k}")
    return path


@pytest.fixture
def pack(tmp_path):
    return _write_pack(str(tmp_path / "all.pack"), 20)


def test_split_pack_cuts_consecutive_shards_and_keeps_them_on_the_next_call(pack, tmp_path):
    shards = split_pack(pack, tmp_path / "shards", [3, 5, 9])
    assert [os.path.basename(p) for p in shards] == ["shard-00.pack", "shard-01.pack", "shard-02.pack"]
    source = PackReader(pack)
    got = [(r.read(i), int(r.labels[i]), r.paths[i]) for r in map(PackReader, shards) for i in range(len(r))]
    assert got == [(source.read(i), int(source.labels[i]), source.paths[i]) for i in range(17)]  # 3 left out
    before = [os.stat(p).st_mtime_ns for p in shards]
    assert split_pack(pack, tmp_path / "shards", [3, 5, 9]) == shards
    assert [os.stat(p).st_mtime_ns for p in shards] == before  # same records: not rewritten
    split_pack(pack, tmp_path / "shards", [4, 5, 9])
    assert len(PackReader(shards[0])) == 4  # different records: rewritten


def test_split_pack_refuses_sizes_the_pack_cannot_fill(pack, tmp_path):
    with pytest.raises(ValueError, match="add up to at most its 20 records"):
        split_pack(pack, tmp_path / "shards", [10, 11])
    with pytest.raises(ValueError, match=">= 1"):
        split_pack(pack, tmp_path / "shards", [0, 5])


def test_pack_records_and_record_key_name_each_record_by_its_stored_checksum(pack, tmp_path):
    reader = PackReader(pack)
    records = list(pack_records(pack))
    assert [r[1] for r in records] == reader.labels.tolist()
    assert [record_key(r) for r in records] == reader.records["crc32"].tolist()
    # As callable shards, whole shards go to one consumer each, and every record comes out once.
    shards = split_pack(pack, tmp_path / "shards", [6, 14])
    keys = []
    for rank in range(2):
        ds = ShardedIterableDataset(
            [functools.partial(pack_records, p) for p in shards], decode=record_key, rank=rank, world_size=2
        )
        keys.append(list(ds))
    assert sorted(map(len, keys)) == [6, 14] and sorted(keys[0] + keys[1]) == sorted(reader.records["crc32"].tolist())


def test_record_key_and_worker_says_which_worker_yielded_each_record(pack, tmp_path):
    shards = split_pack(pack, tmp_path / "shards", [6, 14])
    ds = ShardedIterableDataset(shards, decode=record_key_and_worker, rank=0, world_size=1)
    assert {w for _, w in ds} == {0}  # no workers: the main process
    tagged = [(int(k), int(w)) for k, w in DataLoader(ds, batch_size=None, num_workers=2)]
    plan = ds.epoch_plan(2)
    assert sorted(Counter(w for _, w in tagged).items()) == [(0, plan.per_consumer), (1, plan.per_consumer)]
    assert len({k for k, _ in tagged}) == len(tagged) == 20


@pytest.mark.timeout(60)
def test_feed_stream_is_held_back_by_a_full_buffer():
    maxsize, n, pause = 2, 12, 0.05
    stream = Stream(maxsize=maxsize)
    producer = mp.Process(target=feed_stream, args=(stream, n, 1000.0))
    producer.start()
    made, got = [], []
    for k, made_at in LiveStreamDataset(stream, poll_s=0.1):
        got.append(timestamp())
        made.append((k, made_at))
        time.sleep(pause)  # a slow consumer
    producer.join(timeout=10)
    assert [k for k, _ in made] == list(range(n)) and producer.exitcode == 0
    # Record j is made only once the put before it found room: after the consumer took record j - maxsize - 1
    # (one record of slack for the consumer's own timestamp).
    assert all(made[j][1] >= got[j - maxsize - 2] for j in range(maxsize + 2, n))


@pytest.mark.timeout(240)
def test_ddp_shards_demo_stages_once_balances_steps_and_times_out_on_whole_shards(tmp_path):
    shards = []
    for k, size in enumerate([5, 21, 8]):
        shards.append(_write_pack(str(tmp_path / f"s{k}.pack"), size))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "labkit.course.ddp_shards_demo",
        "--local-dir",
        str(tmp_path / "local"),
        "--workers",
        "1",
        "--batch",
        "2",
        "--timeout",
        "5",
        *shards,
    ]
    out = subprocess.run(command, capture_output=True, text=True, timeout=200)
    text = out.stdout
    assert sorted(os.listdir(tmp_path / "local")) == ["s0.pack", "s1.pack", "s2.pack"]
    assert text.count("(same)") == 3 and "DIFFERENT" not in text, text + out.stderr
    assert "steps per epoch, rank by rank: [[9, 9], [9, 9]]" in text, text + out.stderr  # 34 records: 17 per rank
    # Whole shards in seed 5's order give one rank 5 + 21 records (13 batches) and the other 8 (4 batches): the
    # longer one waits in the all-reduce of its 5th step for a rank that has left the loop, until the timeout.
    assert "ran out of batches after 4 steps" in text, text + out.stderr
    assert "waited in the gradient all-reduce of step 5 for" in text, text + out.stderr
    assert out.returncode != 0
