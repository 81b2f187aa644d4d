"""A few steps of DistributedDataParallel training over `DistributedBlockSampler`, with proof.

    torchrun --nproc_per_node=2 -m labkit.course.ddp_demo          # or: labkit ddp-demo --nproc 2

Every rank trains a small CNN on its share of one epoch, then the ranks all-gather the
sample indices each one saw; rank 0 checks that the shares are disjoint and together cover
the epoch, and prints the numbers. Runs on CPUs (gloo) or GPUs (nccl).
"""

from __future__ import annotations

import argparse
import datetime
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset

from labkit.core.cpus import cpu_budget
from labkit.core.wording import count
from labkit.distributed.ranks import close_process_group, init_from_env
from labkit.samplers.block_shuffle import DistributedBlockSampler
from labkit.workers.start_method import worker_context


class IndexedImages(Dataset):
    """Deterministic 3×32×32 uint8 images whose label is learnable; returns (image, label, index)."""

    def __init__(self, n: int, classes: int = 4) -> None:
        self.n, self.classes = n, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        label = index % self.classes
        g = torch.Generator().manual_seed(index)
        image = torch.randint(0, 64, (3, 32, 32), generator=g, dtype=torch.uint8)
        image[label % 3] += 128  # the label shows as a dominant channel
        return image, label, index


def small_cnn(classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(8 * 16, classes)
    )


def run(
    n: int = 256, batch_size: int = 16, epochs: int = 1, num_workers: int | None = None, timeout_s: float = 120.0
) -> bool:
    # A rank that waits longer than timeout_s for the others fails with an error instead of hanging the demo.
    info = init_from_env(timeout=datetime.timedelta(seconds=timeout_s))
    dataset = IndexedImages(n)
    sampler = DistributedBlockSampler(n, info.world_size, info.rank, seed=0, block_size=32, window=2)
    budget = cpu_budget(ranks=info.local_world_size)
    num_workers = budget.workers_per_rank if num_workers is None else num_workers
    # Workers of a process that runs gloo's threads start from a fork server, not by fork (the article's 6.5).
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        multiprocessing_context=worker_context() if num_workers else None,
        persistent_workers=num_workers > 0,
    )
    model = small_cnn(dataset.classes).to(info.device)
    model = nn.parallel.DistributedDataParallel(
        model, device_ids=[info.device.index] if info.device.type == "cuda" else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ok = True
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen: list[int] = []
        losses = []
        for images, labels, indices in loader:
            images = images.to(info.device).float().div_(255)
            loss = nn.functional.cross_entropy(model(images), labels.to(info.device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += indices.tolist()
            losses.append(loss.item())
        shares: list[list[int]] = [[] for _ in range(info.world_size)]
        dist.all_gather_object(shares, seen)
        if info.rank == 0:
            union = [i for share in shares for i in share]
            disjoint = len(union) == len(set(union))
            covered = set(union) == set(range(n))
            ok = ok and disjoint and covered
            print(
                f"epoch {epoch}: {info.world_size} ranks ({info.backend}, {count(num_workers, 'worker')} each) saw "
                f"{[len(s) for s in shares]} samples; disjoint: {disjoint}; cover all {n}: {covered}; "
                f"rank 0 loss {losses[0]:.3f} -> {losses[-1]:.3f}",
                flush=True,
            )
    if info.rank == 0:
        print(budget.reasoning)
    verdict = [ok]
    dist.broadcast_object_list(verdict, src=0)
    del model, optimizer  # before the group goes: see close_process_group
    close_process_group()
    return bool(verdict[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256, help="samples in the epoch")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers per rank (default: budget)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds a rank waits for the others in a collective before failing (default 120)",
    )
    args = parser.parse_args(argv)
    return 0 if run(args.samples, args.batch, args.epochs, args.workers, args.timeout) else 1


if __name__ == "__main__":
    sys.exit(main())
