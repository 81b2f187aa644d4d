#!/usr/bin/env python3
"""Train an image classifier with labkit's loader: the recipe, as it runs in CI.

ImageFolder or pack -> random-resized crops and flips taken inside the decode -> the device -> mixed
precision where the device has it -> DistributedDataParallel under torchrun -> a checkpoint every few
steps, resumed after a kill -> validation on centre crops. Only ``labkit``'s face and torch are used.

    python examples/train.py --data data/photos --val data/photos-val --epochs 3
    torchrun --standalone --nproc_per_node=2 examples/train.py --data data/photos.pack --checkpoint runs/train.ckpt

Run it again with the same ``--checkpoint`` and it continues where the checkpoint stands: the loader's
place (epoch and position, any ``--workers``), the model, the optimiser and the gradient scaler. The
random crops are drawn from (seed, epoch, index), so the batches it redoes are the ones it lost.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from labkit import (
    CenterCrop,
    DevicePrefetcher,
    DistributedBlockSampler,
    ImageFolderDataset,
    LabkitError,
    PackedDataset,
    RandomPermutationSampler,
    RandomResizedCrop,
    load_checkpoint,
    make_loader,
    save_checkpoint,
)
from labkit.distributed import close_process_group, init_from_env


def open_images(path: str, crop: Any, decoder: str | None) -> Any:
    """A pack file or an ImageFolder, decoded to ``crop``'s boxes."""
    kind = PackedDataset if os.path.isfile(path) else ImageFolderDataset
    return kind(path, decoder=decoder, crop=crop)


def tiny_net(classes: int) -> nn.Module:
    """A small CNN that trains in seconds on a CPU; pass --model resnet18 for a real one."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, classes),
    )


def build_model(name: str, classes: int) -> nn.Module:
    if name == "tiny":
        return tiny_net(classes)
    import torchvision

    return getattr(torchvision.models, name)(num_classes=classes)


def precision(choice: str, device: torch.device) -> tuple[torch.dtype | None, str]:
    """The autocast dtype for ``--amp`` on ``device``, and why."""
    if choice == "off":
        return None, "off (--amp off)"
    if choice == "auto":
        if device.type != "cuda":
            return (
                None,
                "off: on a CPU, bf16 autocast is slower than float32 without AMX/AVX512-BF16; --amp bf16 forces it",
            )
        choice = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    dtype = torch.bfloat16 if choice == "bf16" else torch.float16
    if dtype is torch.float16 and device.type != "cuda":
        raise SystemExit("--amp fp16 needs a CUDA device; use --amp bf16 on a CPU")
    return dtype, f"{choice} autocast" + (" with a gradient scaler" if dtype is torch.float16 else "")


def evaluate(model: nn.Module, loader: Any, device: torch.device, dtype: torch.dtype | None) -> tuple[int, int]:
    """(correct, seen) on this rank's share of the validation set, under inference_mode as torchvision's evaluate."""
    model.eval()
    correct = seen = 0
    with torch.inference_mode(), autocast(device, dtype):
        for images, labels in DevicePrefetcher(loader, device):
            correct += int((model(images).argmax(1) == labels).sum())
            seen += len(labels)
    model.train()
    return correct, seen


def autocast(device: torch.device, dtype: torch.dtype | None) -> Any:
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def train(args: argparse.Namespace) -> dict[str, Any]:
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        info = init_from_env()
        rank, world, device = info.rank, info.world_size, info.device
    else:
        rank, world = 0, 1
        device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    say = print if rank == 0 else (lambda *a, **k: None)
    torch.manual_seed(args.seed)  # the same initial weights on every rank and in every resumed run

    train_set = open_images(args.data, RandomResizedCrop(args.size, seed=args.seed), args.decoder)
    if distributed:
        sampler: Any = DistributedBlockSampler(train_set, num_replicas=world, rank=rank, seed=args.seed, drop_last=True)
    else:
        sampler = RandomPermutationSampler(train_set, seed=args.seed)
    loader = make_loader(train_set, batch_size=args.batch, sampler=sampler, num_workers=args.workers, drop_last=True)
    batches = DevicePrefetcher(loader, device, channels_last=device.type == "cuda")

    model = build_model(args.model, len(train_set.classes)).to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    net = (
        nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if distributed
        else model
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    dtype, amp_note = precision(args.amp, device)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)
    step = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        state = load_checkpoint(args.checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        batches.load_state_dict(state["data"])
        step = state["step"]
        say(f"resumed from {args.checkpoint} at epoch {loader.epoch}, step {step}", flush=True)
    say(
        f"{len(train_set)} training images, {world} rank(s) on {device}, {loader.num_workers} workers each, "
        f"precision: {amp_note}",
        flush=True,
    )

    def checkpoint() -> None:
        if rank == 0:
            save_checkpoint(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scaler": scaler.state_dict(),
                    "data": batches.state_dict(),
                    "step": step,
                },
                args.checkpoint,
            )
            print(f"checkpoint at step {step}", flush=True)

    loss_fn = nn.CrossEntropyLoss()
    while loader.epoch < args.epochs:
        epoch = loader.epoch
        say(f"epoch {epoch}: {batches.batches_left} of its {len(batches)} batches to go", flush=True)
        for images, labels in batches:
            with autocast(device, dtype):
                loss = loss_fn(net(images), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            say(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
            if args.checkpoint and step % args.save_every == 0:
                checkpoint()
        if args.checkpoint and step % args.save_every:
            checkpoint()  # the end of an epoch: a resume starts the next one
    result: dict[str, Any] = {"step": step}
    if args.val:
        val_set = open_images(args.val, CenterCrop(args.size, resize=round(args.size * 256 / 224)), args.decoder)
        val_order = (
            DistributedBlockSampler(val_set, num_replicas=world, rank=rank, drop_last=False) if distributed else None
        )
        val_loader = make_loader(
            val_set,
            batch_size=args.batch,
            shuffle=False if val_order is None else None,
            sampler=val_order,
            num_workers=args.workers,
        )
        counts = torch.tensor(evaluate(model, val_loader, device, dtype), device=device)
        if distributed:
            dist.all_reduce(counts)
        result["val_accuracy"] = counts[0].item() / max(1, counts[1].item())
        say(f"validation: {result['val_accuracy']:.1%} of {counts[1].item()} centre crops", flush=True)
    if distributed:
        del net, optimizer
        close_process_group()
    return result


def parse(argv: list | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="an ImageFolder or a labkit pack (only read)")
    parser.add_argument("--val", default=None, help="an ImageFolder or pack to validate on, with centre crops")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64, help="per rank")
    parser.add_argument("--size", type=int, default=224, help="crop size")
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers per rank (default: labkit's)")
    parser.add_argument("--decoder", default=None, help="default: the fastest installed")
    parser.add_argument("--model", default="tiny", help="tiny, or a torchvision model name (resnet18, ...)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--amp", choices=("auto", "bf16", "fp16", "off"), default="auto")
    parser.add_argument("--device", default=None, help="without torchrun: cpu or cuda (default: cuda if there is one)")
    parser.add_argument("--checkpoint", default=None, help="saved every --save-every steps; resumed from if it exists")
    parser.add_argument("--save-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main() -> int:
    args = parse()
    try:
        train(args)
    except LabkitError as error:
        print(f"train.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
