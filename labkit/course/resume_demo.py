"""A training job that can be killed at any instant and resumed with every sample seen exactly once.

``python -m labkit.course.resume_demo --pack PACK --checkpoint FILE`` trains a stand-in model for a few
epochs over a pack: its "weights" are a count, per epoch, of how many times each sample went
through a training step. Every ``--every`` steps it saves the model and the loader's state
(``loader.state_dict()``, which counts the batches the loop consumed, not the indices the DataLoader's
workers already pulled) with `save_checkpoint`. Run again with the same
checkpoint, it resumes where that checkpoint stands. Kill it (SIGKILL, mid-epoch, mid-write:
anywhere) and resume: the final counts are all exactly one, because the steps after the last
checkpoint are lost together with the model state they changed, and redone.

Each step prints ``step <epoch> <step>``; each checkpoint ``checkpoint <epoch> <step> <handed out>``,
the last being how many indices the sampler had handed to the workers by then.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence, Sized

import torch

from labkit.course.pitfalls import IndexedDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset
from labkit.distributed.checkpoint import load_checkpoint, save_checkpoint
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.workers.loader_factory import make_loader


def steps_per_epoch(dataset: Sized, batch: int) -> int:
    return math.ceil(len(dataset) / batch)


def train(
    pack: str,
    checkpoint: str,
    epochs: int = 2,
    batch_size: int = 16,
    num_workers: int = 2,
    every: int = 3,
    step_s: float = 0.02,
    seed: int = 0,
) -> torch.Tensor:
    """Train (or resume) to the end; return the model: times each sample was trained on, per epoch."""
    dataset = IndexedDataset(DecodedArrayDataset(pack))
    sampler = BlockShuffleSampler.for_batches(len(dataset), batch_size, seed=seed)
    loader = make_loader(
        dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers, persistent_workers=False
    )
    seen = torch.zeros(epochs, len(dataset), dtype=torch.int32)
    if os.path.exists(checkpoint):
        state = load_checkpoint(checkpoint)
        seen = state["seen"]
        loader.load_state_dict(state["loader"])
        place = loader.state_dict()["sampler"]
        print(f"resumed at epoch {place['epoch']} step {place['position'] // batch_size}", flush=True)
    while loader.epoch < epochs:
        epoch, step = loader.epoch, loader.state_dict()["sampler"]["position"] // batch_size
        for indices, _images, _labels in loader:
            seen[epoch, indices] += 1
            time.sleep(step_s)  # the model's forward and backward pass
            step += 1
            print(f"step {epoch} {step}", flush=True)
            if step % every == 0 or step == steps_per_epoch(dataset, batch_size):
                handed_out = loader.sampler.state_dict()["position"]
                save_checkpoint(
                    {
                        "seen": seen,
                        "loader": loader.state_dict(),
                        "epoch": epoch,
                        "step": step,
                        "handed_out": handed_out,
                    },
                    checkpoint,
                )
                print(f"checkpoint {epoch} {step} {handed_out}", flush=True)
    print("done", flush=True)
    return seen


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", required=True, help="a decoded pack (labkit pack --decoded-size ...)")
    parser.add_argument("--checkpoint", required=True, help="resumed from when it exists")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=int, default=3, help="checkpoint every this many steps")
    parser.add_argument("--step-s", type=float, default=0.02, help="seconds the stand-in model step takes")
    args = parser.parse_args(list(argv) or None)
    train(args.pack, args.checkpoint, args.epochs, args.batch, args.workers, args.every, args.step_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
