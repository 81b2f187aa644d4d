import os
import subprocess
import sys
import zlib

import pytest
import torch.distributed as dist
import torch.multiprocessing as tmp

from labkit.distributed.ranks import close_process_group, init_from_env, stage_to_local

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.timeout(60)
def test_ddp_demo_under_torchrun_proves_disjoint_coverage():
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "labkit.course.ddp_demo",
        "--samples",
        "128",
        "--epochs",
        "2",
        "--workers",
        "0",
    ]
    out = subprocess.run(command, capture_output=True, text=True, timeout=55, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("disjoint: True; cover all 128: True") == 2
    assert "saw [64, 64] samples" in out.stdout


def test_init_outside_torchrun_says_how_to_start(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        init_from_env()


def _crc(path):
    return zlib.crc32(open(path, "rb").read())


def _stage(rank, store, shards, local_dir, results):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        paths = stage_to_local(shards, local_dir, local_rank=rank)
        # After the barrier every rank sees every shard, whole.
        ok = all(os.path.exists(p) and _crc(p) == _crc(s) for p, s in zip(paths, shards))
        with open(os.path.join(results, f"rank{rank}"), "w") as f:
            f.write(f"{ok}\n")
    finally:
        dist.destroy_process_group()


def _train_then_close(rank, store, results):
    import torch
    from torch import nn

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    for _ in range(3):
        model(torch.randn(8, 4)).sum().backward()
    del model
    close_process_group()
    with open(os.path.join(results, f"rank{rank}"), "w") as f:
        f.write(f"{dist.is_initialized()}\n")


@pytest.mark.timeout(60)
def test_close_process_group_leaves_no_group_behind(tmp_path):
    tmp.start_processes(_train_then_close, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=2, start_method="fork")
    assert [open(tmp_path / f"rank{r}").read().strip() for r in range(2)] == ["False", "False"]


def _run_two_ranks(tmp_path, shards, local_dir, tag):
    results = tmp_path / f"results-{tag}"
    results.mkdir()
    tmp.start_processes(
        _stage, args=(str(tmp_path / f"store-{tag}"), shards, local_dir, str(results)), nprocs=2, start_method="fork"
    )
    return [open(results / f"rank{r}").read().strip() for r in range(2)]


@pytest.mark.timeout(60)
def test_stage_to_local_copies_once_verified_and_resumes(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shards = []
    for k in range(3):
        path = shared / f"shard-{k}.pack"
        path.write_bytes(os.urandom(300_000 + k))
        shards.append(str(path))
    local = str(tmp_path / "local")
    assert _run_two_ranks(tmp_path, shards, local, "first") == ["True", "True"]
    assert sorted(os.listdir(local)) == ["shard-0.pack", "shard-1.pack", "shard-2.pack"]
    kept = os.stat(os.path.join(local, "shard-0.pack")).st_mtime_ns
    with open(os.path.join(local, "shard-2.pack"), "r+b") as f:  # an interrupted earlier copy
        f.truncate(1000)
    assert _run_two_ranks(tmp_path, shards, local, "again") == ["True", "True"]
    assert os.stat(os.path.join(local, "shard-0.pack")).st_mtime_ns == kept
    assert _crc(os.path.join(local, "shard-2.pack")) == _crc(shards[2])


def test_same_file_name_twice_is_refused(tmp_path):
    with pytest.raises(ValueError, match="same file name"):
        stage_to_local(["a/x.pack", "b/x.pack"], tmp_path, local_rank=1)


def test_ddp_demo_bounds_how_long_a_rank_waits_for_the_others(monkeypatch):
    # A rank that aborts must turn the other's wait into an error within --timeout, not a hang of 30 minutes.
    import datetime

    from labkit.course import ddp_demo

    asked = {}

    def joined(timeout=None, **kwargs):
        asked["timeout"] = timeout
        raise RuntimeError("stop here")

    monkeypatch.setattr(ddp_demo, "init_from_env", joined)
    with pytest.raises(RuntimeError, match="stop here"):
        ddp_demo.main(["--timeout", "7"])
    assert asked["timeout"] == datetime.timedelta(seconds=7)
