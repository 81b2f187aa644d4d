"""Batches that workers write into shared-memory slots the main process reuses, instead of a fresh
/dev/shm segment for every batch.

A DataLoader worker collates each batch into a new shared-memory segment: the kernel allocates
and zeroes its pages (3,072 for a 64×3×256×256 uint8 batch), the main process maps them again,
and the segment is freed when the batch dies, on every batch (`benchmarks/limits.py` measures that against
the same copy into memory already mapped; its figures are in ``benchmarks/README.md``). `SlotLoader` allocates
``slots`` batch tensors in shared memory once; its batch sampler gives each batch a free slot,
the worker writes the samples straight into that slot's rows and sends back only the slot
number and the labels, and the main process yields a view of the slot.

A slot is handed out again only when it is not waiting for a worker and no tensor, view or
storage in the main process refers to its memory any more, so a batch you keep is never
overwritten: keep more batches than there are spare slots and the loader raises and says so.
(The guard sees this process only: a batch you pass on to another process, copy first.) A batch
whose worker raised keeps its slot until the epoch ends.
Workers are always persistent: restarting an epoch waits for every task of the last one, so no
worker can still be writing into a slot that the new epoch hands out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler, SequentialSampler

from labkit.core.errors import LabkitRuntimeError, LabkitTypeError, LabkitValueError
from labkit.core.host_buffers import storage_refs, writable_tensors
from labkit.core.pass_through import PassThrough
from labkit.workers.watchdog import watched_loader

Filled = tuple[int, int, list[int]]  # (slot, samples written, labels)


class SlotBatch(list[int]):
    """The indices of one batch and the slot its images go to."""

    def __init__(self, indices: Sequence[int], slot: int) -> None:
        super().__init__(indices)
        self.slot = slot


class SlotPool:
    """``count`` uint8 batch tensors of ``batch_shape`` in shared memory, and which are in use."""

    def __init__(self, count: int, batch_shape: Sequence[int]) -> None:
        if count < 1:
            raise LabkitValueError(f"a slot pool needs at least 1 slot, got {count}")
        if storage_refs(torch.empty(0)) is None:
            raise LabkitRuntimeError(
                "this PyTorch cannot count references to a tensor's memory "
                "(torch._C._storage_Use_Count), so slots could be overwritten while in use; "
                "use labkit.workers.loader_factory.make_loader instead"
            )
        with writable_tensors():  # workers write them, whatever mode the pool was made in
            self.slots = [torch.empty(tuple(batch_shape), dtype=torch.uint8).share_memory_() for _ in range(count)]
        self.pending: set[int] = set()  # handed to a worker, not yet yielded

    def __repr__(self) -> str:
        held = sum(k not in self.pending and storage_refs(slot) != 1 for k, slot in enumerate(self.slots))
        shape = tuple(self.slots[0].shape)
        return f"SlotPool({len(self.slots)} slots of {shape}: {len(self.pending)} pending, {held} held)"

    def __getstate__(self) -> dict[str, Any]:
        return {"slots": self.slots, "pending": set()}  # workers write; only the main process allocates

    def take(self) -> int:
        """A slot no worker is writing and nothing in this process refers to; raises if there is none."""
        for k, slot in enumerate(self.slots):
            if k not in self.pending and storage_refs(slot) == 1:
                self.pending.add(k)
                return k
        raise LabkitRuntimeError(
            f"all {len(self.slots)} batch slots are in use: {len(self.pending)} are with workers or waiting to be "
            f"handed out, {len(self.slots) - len(self.pending)} hold batches still referenced in this process. "
            "Keep fewer batches alive (copy one you keep: images.clone()) or pass SlotLoader(slots=...) more slots"
        )


class SlotSampler(Sampler[SlotBatch]):
    """Batches of ``sampler``'s indices, each carrying a free slot of ``pool``."""

    def __init__(self, sampler: Sampler, batch_size: int, drop_last: bool, pool: SlotPool) -> None:
        self.sampler, self.batch_size, self.drop_last, self.pool = sampler, batch_size, drop_last, pool

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[SlotBatch]:
        # The body starts when the DataLoader asks for the first batch of an epoch, after it has
        # collected every task of the last one: no slot is being written any more.
        self.pool.pending.clear()
        indices: list[int] = []
        for i in self.sampler:
            indices.append(i)
            if len(indices) == self.batch_size:
                yield SlotBatch(indices, self.pool.take())
                indices = []
        if indices and not self.drop_last:
            yield SlotBatch(indices, self.pool.take())


class SlotDataset(PassThrough, Dataset):
    """``dataset``'s ``(uint8 image, label)`` samples, a batch at a time, written into a pool slot."""

    wraps = "dataset"

    def __init__(self, dataset: Dataset, pool: SlotPool) -> None:
        self.dataset, self.pool = dataset, pool

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitems__(self, batch: SlotBatch) -> Filled:
        rows = self.pool.slots[batch.slot]
        if getattr(self.dataset, "fills_batches", False) and getattr(self.dataset, "size", None) == tuple(
            rows.shape[-2:]
        ):
            samples = self.dataset.__getitems__(list(batch), out=rows[: len(batch)])  # decoded straight into the slot
        elif hasattr(self.dataset, "__getitems__"):
            samples = self.dataset.__getitems__(list(batch))
        else:
            samples = [self.dataset[i] for i in batch]
        labels = []
        for k, (index, (image, label)) in enumerate(zip(batch, samples)):
            if not isinstance(image, torch.Tensor):
                raise LabkitTypeError(
                    f"sample {index}: the image is a {type(image).__name__}; the batch slots take uint8 "
                    "torch tensors (C×H×W), as labkit's datasets return"
                )
            if image.dtype != torch.uint8 or image.shape != rows.shape[1:]:
                raise LabkitValueError(
                    f"sample {index} is a {image.dtype} image of shape {tuple(image.shape)}; the batch "
                    f"slots hold uint8 images of shape {tuple(rows.shape[1:])}. Resize every image to "
                    "one size (the decoders' size=) and keep them uint8"
                )
            if image.data_ptr() != rows[k].data_ptr():
                rows[k].copy_(image)
            labels.append(int(label))
        return batch.slot, len(labels), labels


def _as_is(filled: Filled) -> Filled:
    return filled


class SlotLoader:
    """A DataLoader over ``dataset`` whose batches ``(uint8 B×C×H×W, int64 labels)`` live in reused
    shared-memory slots. Use it as the DataLoader it wraps (``.loader``): iterate, ``len()``.

    Batches are shuffled (``shuffle``, seeded by ``generator``) unless a ``sampler`` is given.
    ``image_shape`` is read from ``dataset[0]`` if not given. ``slots`` defaults to what can be in
    flight (``num_workers × prefetch_factor``), the batch just received, the one your loop holds
    and one spare for a batch you keep; fewer than the first two is refused. Other keyword
    arguments go to the DataLoader (``worker_init_fn``, ...), except ``pin_memory``: there the main
    process itself copies each batch out of its slot into page-locked memory. A killed worker is
    reported as `LoaderWorkerError`; ``hang_timeout=`` seconds without a batch as `LoaderHangError`.
    labkit's image datasets decode each batch straight into its slot (their ``__getitems__`` takes ``out=``).
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 64,
        shuffle: bool = True,
        sampler: Sampler | None = None,
        num_workers: int = 2,
        prefetch_factor: int | None = None,
        drop_last: bool = False,
        image_shape: Sequence[int] | None = None,
        slots: int | None = None,
        generator: torch.Generator | None = None,
        hang_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.dataset = dataset
        shape = tuple(image_shape) if image_shape is not None else tuple(dataset[0][0].shape)
        in_flight = num_workers * (prefetch_factor or 2)
        if slots is not None and slots < in_flight + 2:
            raise LabkitValueError(
                f"slots={slots}: {num_workers} workers x prefetch_factor {prefetch_factor or 2} keep "
                f"{in_flight} batches in flight, and the batch just received and the one your loop holds "
                f"need 2 more: pass at least {in_flight + 2}"
            )
        count = slots if slots is not None else in_flight + 3
        self.pool = SlotPool(count, (batch_size, *shape))
        self.pin_memory = bool(kwargs.pop("pin_memory", False))
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)  # type: ignore[arg-type]
        batches = SlotSampler(sampler, batch_size, drop_last, self.pool)
        options = dict(kwargs, batch_sampler=batches, num_workers=num_workers, collate_fn=_as_is)
        if num_workers:
            options["persistent_workers"] = True
        if prefetch_factor is not None:
            options["prefetch_factor"] = prefetch_factor  # without workers, the DataLoader says why not
        slotted = SlotDataset(dataset, self.pool)
        # With workers, a worker that dies is named with the batch it held (`labkit.workers.watchdog`), whatever the
        # moment; ``hang_timeout`` also turns a stuck one into an explained error.
        self.loader: Any = (
            watched_loader(slotted, hang_timeout or math.inf, **options)
            if num_workers
            else DataLoader(slotted, **options)
        )

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for slot, n, labels in self.loader:
            images = self.pool.slots[slot][:n]
            self.pool.pending.discard(slot)  # from here on, `images` keeps the slot from being reused
            if self.pin_memory:
                images = images.pin_memory()  # a copy: the slot is free again at once
            yield images, torch.tensor(labels, dtype=torch.int64)
            del images  # else this frame would hold the slot while the next batch is fetched
