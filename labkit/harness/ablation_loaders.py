"""How the ablation builds each version's loader and what follows it: v1–v4 as the article's DataLoader code, v5 and
later through `labkit.workers.loader_factory.make_loader` (the call printed under the table), the device stage
(copy, normalise, mix; nvJPEG's decode for v8) and the model step a run times with ``--model``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler

from labkit.collate.batching import list_collate, stack_samples, stack_uint8
from labkit.collate.mixing import MixUp, MixUpCollate
from labkit.core.host_buffers import HostBuffers
from labkit.datasets.labeled_images import LabeledImageDataset
from labkit.datasets.pack_datasets import PackedDataset
from labkit.datasets.storage_kinds import DECODED_PACK, ENCODED_PACK, PACK
from labkit.decode.decoder_contract import OUTPUT_SIZE
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.registry import DECODERS, NO_DECODE
from labkit.device.device_decode import DeviceDecoded
from labkit.device.transfer import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher, normalize_uint8
from labkit.diagnose.autotuner import LoaderConfig
from labkit.harness.ablation_versions import (
    GPU_DECODER,
    TRAIN_OUTPUT_SIZE,
    AblationSettings,
    AblationVersion,
    NormalizeInWorker,
)
from labkit.harness.workspace import Workspace
from labkit.measure.decoder_speed import time_decoders
from labkit.measure.loader_timing import spread_indices
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.epoch_tagged import EpochTagged
from labkit.workers.loader_factory import make_loader
from labkit.workers.stateful_loader import StatefulLoader
from labkit.workers.thread_budget import main_thread_budget


def fastest_decoder(ws: Workspace, samples: int = 16, crops: bool = False) -> tuple[str, dict[str, float]]:
    """Time each decoder on the same files (spread over every class) in this process; the fastest is v5's, and
    the fastest of those that crop inside their decode (`labkit.decode.registry`) t5's (``crops=True``)."""
    reader = PackedDataset(ws.pack).reader
    times = time_decoders([reader.read(i) for i in spread_indices(len(reader), samples)], OUTPUT_SIZE)
    candidates = [d for d in times if not crops or DECODERS[d].crops_in_decode]
    return min(candidates, key=times.get), times


def _dataset(version: AblationVersion, ws: Workspace, decoder: str, seed: int = 0) -> LabeledImageDataset:
    transform = NormalizeInWorker() if version.normalize_in_workers else None
    crop = RandomResizedCrop(TRAIN_OUTPUT_SIZE, seed=seed) if version.crop else None
    if version.storage == ENCODED_PACK:
        return ws.open(ENCODED_PACK)
    return ws.open(
        version.storage, decoder, OUTPUT_SIZE, transform=transform, crop=crop, check_crc=version.checksum_reads
    )


def build_loader(
    version: AblationVersion, ws: Workspace, settings: AblationSettings, decoder: str, tuned: LoaderConfig | None = None
) -> tuple[Iterable, dict[str, Any]]:
    """The loader a version describes (v1-v4: the article's DataLoader code; labkit's versions: `make_loader`'s,
    whose call is ``described["call"]``); also returns its settings, for the JSON report."""
    cuda = settings.resolved_device().type == "cuda"
    storage = version.storage
    if tuned is not None:
        storage = DECODED_PACK if tuned.decoder == NO_DECODE else PACK
        decoder = tuned.decoder
        version = replace(
            version,
            storage=storage,
            decoder=decoder,
            workers=True,
            prefetch_factor=tuned.prefetch_factor,
            normalize_in_workers=False,
            mix="device",
            sampler=tuned.sampler,
        )
    dataset = _dataset(version, ws, decoder, settings.seed)
    workers = (tuned.num_workers if tuned else settings.resolved_num_workers()) if version.workers else 0
    slots = version.batch_slots and workers > 0 and not cuda
    if tuned and tuned.main_threads:
        main_threads = tuned.main_threads
    elif version.budget_main_threads:
        main_threads = main_thread_budget(workers)
    else:
        main_threads = torch.get_num_threads()
    described: dict[str, Any] = {
        "dataset": type(dataset).__name__,
        "decoder": decoder,
        "num_workers": workers,
        "crop": f"RandomResizedCrop({TRAIN_OUTPUT_SIZE}) + flip" if version.crop else None,
        "normalize": "in workers" if version.normalize_in_workers else "on device",
        "mix": version.mix,
        "main_threads": main_threads,
        "host_buffers": "reused" if version.reuse_host_buffers else "fresh per batch",
        "checksums": "every read" if version.checksum_reads else "verified once",
    }
    if version.by_make_loader:
        return _made_loader(version, dataset, settings, workers, cuda, slots, tuned, described)
    if version.sampler == "block":
        sampler = BlockShuffleSampler.for_batches(len(dataset), settings.batch_size, settings.seed)
    else:
        sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(settings.seed))
    if version.crop:  # each index carries its epoch, so every epoch draws new boxes
        sampler = EpochTagged(sampler)
    collate = (
        MixUpCollate(len(ws.classes), seed=settings.seed, stack=stack_samples)
        if version.mix == "collate"
        else (stack_samples if version.normalize_in_workers else stack_uint8)
    )
    options: dict[str, Any] = dict(
        batch_size=settings.batch_size,
        sampler=sampler,
        num_workers=workers,
        collate_fn=collate,
        pin_memory=cuda and version.workers,
    )
    if workers:
        options["persistent_workers"] = True
        if version.prefetch_factor:
            options["prefetch_factor"] = version.prefetch_factor
    described.update(
        pin_memory=options["pin_memory"],
        persistent_workers=bool(workers),
        prefetch_factor=options.get("prefetch_factor", 2 if workers else None),
        collate=getattr(collate, "__name__", type(collate).__name__),
        sampler=type(sampler).__name__,
        batch_memory="fresh shared memory per batch" if workers else "main process",
        call="the article's DataLoader(dataset, batch_size, sampler, num_workers, collate_fn, pin_memory, "
        "persistent_workers, prefetch_factor) code",
    )
    return DataLoader(dataset, **options), described


def _made_loader(
    version: AblationVersion,
    dataset: Any,
    settings: AblationSettings,
    workers: int,
    cuda: bool,
    slots: bool,
    tuned: LoaderConfig | None,
    described: dict[str, Any],
) -> tuple[StatefulLoader, dict[str, Any]]:
    """A labkit version's loader: `make_loader`'s, the one an engineer gets from the call the report prints."""
    if tuned is not None:
        kwargs = tuned.loader_kwargs(len(dataset), settings.batch_size)
        call = tuned.make_loader_call("dataset", settings.batch_size)
    else:
        kwargs = dict(batch_size=settings.batch_size, num_workers=workers)
        if version.sampler == "block":
            kwargs["sampler"] = BlockShuffleSampler.for_batches(len(dataset), settings.batch_size, settings.seed)
        if version.prefetch_factor and workers:
            kwargs["prefetch_factor"] = version.prefetch_factor
        if slots:
            kwargs["batch_slots"] = True
        if version.storage == ENCODED_PACK:
            kwargs["collate_fn"] = list_collate
        shown = {
            k: (
                f"BlockShuffleSampler.for_batches(len(dataset), {settings.batch_size}, seed={settings.seed})"
                if k == "sampler"
                else getattr(v, "__name__", repr(v))
            )
            for k, v in kwargs.items()
        }
        call = "make_loader(dataset, " + ", ".join(f"{k}={v}" for k, v in shown.items()) + ")"
    if "sampler" not in kwargs:
        kwargs["seed"] = settings.seed
        call = call[:-1] + f", seed={settings.seed})"
    loader = make_loader(dataset, pin_memory=cuda and workers > 0, **kwargs)
    ahead = kwargs.get("prefetch_factor")
    described.update(
        pin_memory=loader.pin_memory,
        persistent_workers=bool(workers),
        prefetch_factor=ahead if ahead is not None else (2 if workers else None),
        collate="rows of a slot (labkit.workers.shared_slots)"
        if kwargs.get("batch_slots")
        else getattr(loader.collate_fn, "__name__", type(loader.collate_fn).__name__),
        sampler=type(loader.sampler).__name__,
        batch_memory="reused shared-memory slots"
        if kwargs.get("batch_slots")
        else (
            "fresh shared memory per batch"
            if workers
            else f"main process, a producer thread {ahead} batches ahead"
            if ahead
            else "main process"
        ),
        call=call,
    )
    return loader, described


def _gpu_decoded(loader: Iterable, device: torch.device, mix: Callable) -> Iterator[Any]:
    for images, labels in DeviceDecoded(loader, OUTPUT_SIZE, device, GPU_DECODER):
        yield mix(normalize_uint8(images), labels)


def device_batches(version: AblationVersion, loader: Iterable, settings: AblationSettings, classes: int) -> Iterable:
    """The loader followed by the device stage: copy, normalise and mix where the version says."""
    device = settings.resolved_device()
    buffers = HostBuffers(keep=4 if version.reuse_host_buffers else 0)
    mix = MixUp(classes, seed=settings.seed, buffers=buffers) if version.mix == "device" else None
    if version.storage == ENCODED_PACK:
        return _gpu_decoded(loader, device, mix or (lambda images, labels: (images, labels)))
    normalize = None if version.normalize_in_workers else (IMAGENET_MEAN, IMAGENET_STD)
    return DevicePrefetcher(loader, device, normalize=normalize, mix=mix, buffers=buffers)


def model_step(device: torch.device, classes: int) -> Callable[[Any], None]:
    """One training step: a small CNN on a CPU, ResNet-50 on a GPU (weights random: speed only)."""
    if device.type == "cuda":
        from torchvision.models import resnet50

        model: nn.Module = resnet50(num_classes=classes).to(device, memory_format=torch.channels_last)
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, classes),
        ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: Any) -> None:
        images, targets = batch[0].to(device), batch[1].to(device)
        loss = nn.functional.cross_entropy(model(images), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step
