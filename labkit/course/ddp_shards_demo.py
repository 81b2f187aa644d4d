"""DDP over uneven pack shards, under torchrun: staged once per node, equal steps per rank, and the hang.

    torchrun --nproc_per_node=2 -m labkit.course.ddp_shards_demo --local-dir LOCAL SHARD.pack ...

1. `stage_to_local` copies the shards to ``--local-dir`` once per node (local rank 0 copies and
   checks each copy's CRC32; the other ranks wait at a barrier), and every rank reads the copies.
2. Two epochs of DDP over `ShardedIterableDataset` (equal contiguous runs per rank × worker):
   the ranks all-gather their step counts, and rank 0 prints them with the epoch's plan.
3. One epoch where each rank reads **whole shards** (the shards as callables, the split an
   iterable dataset falls back to when it cannot know lengths): the ranks get different
   record counts, the rank with fewer batches leaves the loop, and the other waits in the
   gradient all-reduce for a partner that never comes. This epoch runs in a process group
   whose ``--timeout`` turns that wait into an error, which each rank reports before exiting.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import re
import sys
import zlib
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from labkit.core.cpus import cpu_budget
from labkit.core.timing import Stopwatch
from labkit.datasets.iterable import ShardedIterableDataset
from labkit.distributed.ranks import close_process_group, file_crc32, init_from_env, stage_to_local
from labkit.storage.shards import pack_records
from labkit.workers.start_method import worker_context


def features(record: tuple[bytes, int]) -> tuple[torch.Tensor, int]:
    """A record as 4 numbers derived from its bytes (no decode: this demo is about counts, not pixels)."""
    data, label = record
    return torch.full((4,), zlib.crc32(data) % 97 / 97.0), label


def _train_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, loader: DataLoader) -> int:
    steps = 0
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y % 2).backward()  # all-reduces the gradients across ranks
        optimizer.step()
        steps += 1
    return steps


def _first_line(error: BaseException) -> str:
    """An error's first line without the C++ source location gloo puts in front of it."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return re.sub(r"^\[[^\]]*\]\s*", "", text)[:160]


def run(
    shards: Sequence[str], local_dir: str, batch_size: int = 8, workers: int | None = None, timeout_s: float = 10.0
) -> None:
    info = init_from_env("gloo")
    say = functools.partial(print, flush=True)

    watch = Stopwatch()
    local = stage_to_local(shards, local_dir, info.local_rank)
    staged_s = watch.elapsed
    timings: list[float | None] = [None] * info.world_size
    dist.all_gather_object(timings, staged_s)
    if info.rank == 0:
        checks = [(os.path.basename(s), file_crc32(s), file_crc32(d)) for s, d in zip(shards, local)]
        say(
            f"staging: local rank 0 copied {len(local)} shards in {timings[0]:.2f} s; the other ranks waited at the "
            f"barrier ({', '.join(f'{t:.2f} s' for t in timings[1:])})"
        )
        for name, src, dst in checks:
            say(f"  {name}: CRC32 shared {src:08x}, local {dst:08x} {'(same)' if src == dst else '(DIFFERENT)'}")

    workers = cpu_budget(ranks=info.local_world_size).workers_per_rank if workers is None else workers
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    balanced = ShardedIterableDataset(local, decode=features, seed=5)
    loader = DataLoader(
        balanced,
        batch_size=batch_size,
        num_workers=workers,  # not forked beside gloo's threads
        multiprocessing_context=worker_context() if workers else None,
    )
    steps = []
    for epoch in range(2):
        balanced.set_epoch(epoch)
        steps.append(_train_epoch(model, optimizer, loader))
    gathered: list[list[int] | None] = [None] * info.world_size
    dist.all_gather_object(gathered, steps)
    if info.rank == 0:
        say(
            f"balanced split ({workers} worker{'s' if workers != 1 else ''} per rank, batch {batch_size}): "
            f"steps per epoch, rank by rank: {gathered}"
        )
        say(f"  {balanced.plans[-1]}")

    # Its own process group with a short timeout, so that only this epoch's waits can time out; no workers, so that
    # no slow worker start can be mistaken for the hang.
    group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    model = nn.parallel.DistributedDataParallel(model.module, process_group=group)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    whole = ShardedIterableDataset(
        [functools.partial(pack_records, p) for p in local],
        decode=features,
        seed=5,
        rank=info.rank,
        world_size=info.world_size,
    )
    loader = DataLoader(whole, batch_size=batch_size, num_workers=0)
    steps_done, where, since = 0, "in the gradient all-reduce of step 1", Stopwatch()
    try:
        for x, y in loader:
            where, since = f"in the gradient all-reduce of step {steps_done + 1}", Stopwatch()
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y % 2).backward()
            optimizer.step()
            steps_done += 1
        where, since = f"after its last step ({steps_done}), gathering the step counts", Stopwatch()
        say(
            f"whole-shard split: rank {info.rank} ran out of batches after {steps_done} steps and waits for the "
            "others to compare step counts"
        )
        counts: list[int | None] = [None] * info.world_size
        dist.all_gather_object(counts, steps_done, group=group)
        say(f"whole-shard split: rank {info.rank} sees step counts {counts}")
    except RuntimeError as e:
        say(
            f"whole-shard split: rank {info.rank} waited {where} for {since.elapsed:.1f} s "
            f"(timeout {timeout_s:g} s), then failed: {type(e).__name__}: {_first_line(e)}"
        )
        os._exit(3)  # the process group is broken: leave without the collectives of a clean shutdown
    del model, optimizer  # before the group goes: see close_process_group
    close_process_group()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shards", nargs="+", help="pack files on shared storage")
    parser.add_argument("--local-dir", required=True, help="this node's local folder to stage the shards into")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers per rank (default: budget)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a collective may wait before failing")
    args = parser.parse_args(argv)
    run(args.shards, args.local_dir, args.batch, args.workers, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
