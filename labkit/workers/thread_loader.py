"""A loader with no worker processes: batches decoded by threads of the main process, one producer thread ahead.

FFCV's loader works so: no process per worker, no batch crossing from one process to another, no pickled
dataset and no worker start-up; the decoders release the GIL, so threads decode in parallel. `ThreadLoader` is
`make_loader` with ``num_workers=0`` and ``prefetch_factor`` batches made ahead by a producer thread
(`labkit.workers.batches_ahead`): the same loader, with the same place-keeping, as any other the kit makes.
Whether it beats process workers depends on how much of a sample's time holds the GIL:
`labkit.diagnose.autotuner` measures both and keeps the faster.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import Sampler

from labkit.core.cpus import cpu_budget
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.datasets.labeled_images import LabeledImageDataset
from labkit.workers.loader_factory import make_loader
from labkit.workers.stateful_loader import StatefulLoader


def ThreadLoader(
    dataset: LabeledImageDataset,
    batch_size: int = 64,
    shuffle: bool = True,  # noqa: N802 (a loader)
    sampler: Sampler | None = None,
    drop_last: bool = False,
    threads: int | None = None,
    prefetch: int = 2,
    collate_fn: Callable | None = None,
    pin_memory: bool | None = None,
    generator: torch.Generator | None = None,
) -> StatefulLoader:
    """Batches ``(uint8 B×3×H×W, int64 labels)`` of a labkit image dataset, decoded by ``threads`` threads of
    this process (default: the rank's CPUs, `labkit.core.cpus`), ``prefetch`` batches ahead: ``make_loader(dataset,
    num_workers=0, prefetch_factor=prefetch, ...)``. Iterate it, and ``len()`` it, as a DataLoader."""
    if not getattr(dataset, "fills_batches", False):
        raise LabkitTypeError(
            "ThreadLoader needs a labkit image dataset that decodes whole batches (ImageFolderDataset, "
            f"PackedDataset, DecodedArrayDataset), not {type(dataset).__name__}: use torch's "
            "DataLoader for other datasets"
        )
    if prefetch < 1:
        raise LabkitValueError(f"prefetch={prefetch}: at least 1 batch ahead")
    if sampler is not None and shuffle:
        raise LabkitValueError(
            "sampler and shuffle=True together: the sampler decides the order; pass "
            "shuffle=False with it (as torch's DataLoader requires)"
        )
    dataset.decode_threads = threads or cpu_budget().decode_threads(0)
    return make_loader(
        dataset,
        batch_size,
        shuffle=None if sampler is not None else shuffle,
        sampler=sampler,
        num_workers=0,
        prefetch_factor=prefetch,
        drop_last=drop_last,
        collate_fn=collate_fn,
        pin_memory=pin_memory,
        generator=generator,
    )
