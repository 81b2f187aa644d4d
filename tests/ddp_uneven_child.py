"""A few DDP steps a epoch over uneven pack shards; started under torchrun by tests/datasets/test_iterable.py.

``torchrun --nproc_per_node=2 ddp_uneven_child.py SHARD...`` trains a linear model for two epochs on
`ShardedIterableDataset` records with 2 DataLoader workers per rank, then all-gathers how many steps each rank took;
rank 0 prints them in one line (two ranks printing to one pipe can interleave): ``rank 0: steps per epoch [...], all
ranks [...]``. If one rank had fewer batches, the other would wait for it in an all-reduce forever: the test's timeout
catches that.
"""

from __future__ import annotations

import datetime
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from labkit.course.ddp_shards_demo import features
from labkit.datasets.iterable import ShardedIterableDataset
from labkit.distributed.ranks import close_process_group, init_from_env


def main(shards) -> None:
    info = init_from_env("gloo", timeout=datetime.timedelta(seconds=60))  # a hang ends as an error
    dataset = ShardedIterableDataset(shards, decode=features, seed=5)
    loader = DataLoader(dataset, batch_size=4, num_workers=2)
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = []
    for epoch in range(2):
        dataset.set_epoch(epoch)
        steps.append(0)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()  # all-reduces the gradients across ranks
            optimizer.step()
            steps[-1] += 1
    gathered = [None] * info.world_size
    dist.all_gather_object(gathered, steps)
    if info.rank == 0:
        print(f"rank 0: steps per epoch {steps}, all ranks {gathered}; {dataset.plans[-1]}", flush=True)
    del model, optimizer
    close_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
