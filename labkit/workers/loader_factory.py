"""labkit's loader factory: a DataLoader with sound defaults, and the switches that need no code change.

`make_loader` picks what this kit measures to be right for uint8 image datasets (uint8
stacking, pinned memory where CUDA exists, persistent workers, one thread per worker), and
adds two optional layers: ``LABKIT_PROFILE=1`` in the environment (or ``profile=True``) prints
a wait/compute report at the end of every epoch (article section 8's "profile switch"), and
``hang_timeout=`` turns a stuck worker into an explained error (`labkit.workers.watchdog`). The loader
it returns keeps its own place in the order (`labkit.workers.stateful_loader`): resuming a killed
run is ``loader.load_state_dict(checkpoint["loader"])``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, Sampler, Subset

from labkit.collate.batching import stack_uint8
from labkit.core.cpus import cpu_budget
from labkit.core.environment import profile_enabled
from labkit.core.errors import LabkitValueError, LabkitWarning
from labkit.core.wording import count
from labkit.datasets.epoch_scoped import EpochScoped
from labkit.datasets.labeled_images import LabeledImageDataset
from labkit.samplers.epoch_tagged import EpochTagged
from labkit.samplers.every_sample import InOrderSampler, RandomPermutationSampler
from labkit.samplers.resumable import ResumableSampler
from labkit.workers.batches_ahead import BatchesAhead
from labkit.workers.profiled_loader import ProfiledLoader
from labkit.workers.shared_slots import SlotLoader
from labkit.workers.start_method import worker_context
from labkit.workers.stateful_loader import StatefulLoader
from labkit.workers.thread_budget import limit_worker_threads
from labkit.workers.watchdog import watched_loader
from labkit.workers.worker_init import WorkerInitChain

DEFAULT_BATCH_SIZE = 64

#: What a DataLoader tells its trainers about itself; a `make_loader` loader tells the same (`StatefulLoader`).
TORCH_ATTRIBUTES = (
    "dataset",
    "batch_size",
    "sampler",
    "batch_sampler",
    "drop_last",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)


def _order(
    dataset: Dataset,
    shuffle: bool | None,
    sampler: Sampler | None,
    batch_sampler: Sampler | None,
    seed: int | None,
    generator: torch.Generator | None,
) -> tuple[Any, bool]:
    """The sampler the loader draws from, and whether make_loader made it (and so drew its seed)."""
    given = sampler if sampler is not None else batch_sampler
    if given is not None:
        if shuffle:
            raise LabkitValueError(
                f"shuffle=True with {'sampler' if sampler is not None else 'batch_sampler'}="
                f"{type(given).__name__}: the sampler decides the order, so torch's DataLoader "
                "refuses both; drop shuffle=True (or the sampler)"
            )
        if seed is not None:
            raise LabkitValueError(
                "seed= seeds the order make_loader draws itself; with a sampler of your own, "
                "give the seed to that sampler"
            )
        return (given.sampler if isinstance(given, EpochTagged) else given), False
    if isinstance(dataset, IterableDataset):
        if shuffle:
            raise LabkitValueError(
                f"shuffle=True with an IterableDataset ({type(dataset).__name__}): the dataset "
                "decides its order (torch's DataLoader refuses it too); shuffle inside the stream"
            )
        return None, False
    if shuffle is False:
        return InOrderSampler(dataset), False  # type: ignore[arg-type]
    seed_drawn = seed is None
    chosen = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item()) if seed_drawn else int(seed)  # type: ignore
    return RandomPermutationSampler(dataset, seed=chosen), seed_drawn  # type: ignore[arg-type]


def _slot_loader(
    image_dataset: Any,
    dataset: Dataset,
    batches: BatchSampler | None,
    options: dict[str, Any],
    hang_timeout: float | None,
) -> SlotLoader:
    """``batch_slots=True``: the batches made here, each written by a worker into a reused shared-memory slot."""
    if not (
        getattr(image_dataset, "fills_batches", False)
        and getattr(image_dataset, "size", None) is not None
        and image_dataset is dataset
        and isinstance(batches, BatchSampler)
    ):
        raise LabkitValueError(
            f"batch_slots=True needs a labkit image dataset whose images share one size, batched "
            f"by batch_size= (not {type(dataset).__name__} with batch_sampler= or batch_size=None): "
            "its batches are decoded straight into the slots"
        )
    if options.get("collate_fn") is not stack_uint8:
        raise LabkitValueError("batch_slots=True hands out the slot's rows as the batch: leave collate_fn out")
    slot_options = {k: v for k, v in options.items() if k not in ("batch_sampler", "collate_fn", "persistent_workers")}
    return SlotLoader(
        image_dataset,
        batches.batch_size,
        sampler=EpochTagged(batches.sampler),
        drop_last=batches.drop_last,
        image_shape=(3, *image_dataset.size),
        hang_timeout=hang_timeout,
        **slot_options,
    )


def _warn_past_share(workers: int) -> None:
    budget = cpu_budget()
    if workers <= budget.share:
        return
    where = (
        f"where {count(budget.ranks, 'rank')} ({budget.source}) share {count(budget.cpus, 'usable CPU')}, "
        f"{budget.share} each"
        if budget.ranks > 1
        else f"on {count(budget.cpus, 'usable CPU')}"
    )
    warnings.warn(
        f"num_workers={workers} {where}: the workers share the cores, and each holds its own batches in "
        f"memory; more workers than CPUs rarely reads faster. Leave num_workers out for "
        f"{budget.workers_per_rank} (labkit.core.cpus.cpu_budget), or run `labkit autotune` to measure "
        "the count",
        LabkitWarning,
        stacklevel=3,
    )


def make_loader(
    dataset: Dataset,
    batch_size: int | None = DEFAULT_BATCH_SIZE,
    shuffle: bool | None = None,
    sampler: Sampler | None = None,
    batch_sampler: Sampler | None = None,
    num_workers: int | None = None,
    collate_fn: Callable | None = None,
    pin_memory: bool | None = None,
    drop_last: bool = False,
    prefetch_factor: int | None = None,
    persistent_workers: bool | None = None,
    worker_init_fn: Callable[[int], None] | None = None,
    seed: int | None = None,
    profile: bool | None = None,
    hang_timeout: float | None = None,
    batch_slots: bool = False,
    **kwargs: Any,
) -> StatefulLoader:
    """A DataLoader over ``dataset`` that keeps its own place (`StatefulLoader`); every argument left as
    ``None`` gets labkit's default, and the rest mean what they mean to ``torch.utils.data.DataLoader``.
    The dataset receives what torch's DataLoader would give it (plain ``int`` indices, a plain ``list`` to
    ``__getitems__``), and the loader's attributes (``loader.dataset``, ``.batch_size``, ``.sampler``...) are
    those a DataLoader given the same arguments would have.

    Defaults: the order is a fresh random permutation each epoch (``shuffle=False``: in order), seeded by
    ``seed`` or, without one, by a draw from ``generator`` (torch's default one if none is given, so
    ``torch.manual_seed`` makes it repeatable), and resumable either way; ``num_workers``: the rank's share of the
    CPUs less one (`labkit.core.cpus`, which knows torchrun's ranks); ``collate_fn`` =
    `stack_uint8` for labkit image datasets; ``pin_memory`` where CUDA exists; ``persistent_workers``
    when there are workers, started by fork unless this process holds a torch.distributed process group, whose
    threads a forked worker could inherit half-held (then from a fork server: `labkit.workers.start_method`);
    one native thread per worker. Whatever the sampler, its batches are tagged with
    their epoch (`EpochTagged`) and fetched in that epoch's scope (`labkit.datasets.epoch_scoped`), so labkit's
    crops draw per (seed, epoch, index) in every worker, persistent ones included.

    Two switches torch's DataLoader does not have, so that every loader the kit measures is one this returns:
    ``num_workers=0`` with a ``prefetch_factor`` loads in the main process from a producer thread that many batches
    ahead (`labkit.workers.batches_ahead`: torch refuses the pair; the dataset's threads decode each batch);
    ``batch_slots=True`` has the workers write each batch of a labkit image dataset into reused shared memory
    (`labkit.workers.shared_slots`) instead of a new block per batch.
    """
    workers = cpu_budget().workers_per_rank if num_workers is None else num_workers
    _warn_past_share(workers)
    order, seed_drawn = _order(dataset, shuffle, sampler, batch_sampler, seed, kwargs.get("generator"))
    image_dataset = dataset.dataset if isinstance(dataset, Subset) else dataset
    if collate_fn is None and isinstance(image_dataset, LabeledImageDataset):
        collate_fn = stack_uint8
    options: dict[str, Any] = dict(
        num_workers=workers,
        collate_fn=collate_fn,
        pin_memory=torch.cuda.is_available() if pin_memory is None else pin_memory,
        **kwargs,
    )
    batches: Sampler | None = None  # the batch sampler a DataLoader given these arguments would have
    if batch_sampler is not None:
        if batch_size not in (DEFAULT_BATCH_SIZE, None) or drop_last:
            raise LabkitValueError(
                f"batch_sampler= makes the batches, so batch_size={batch_size} and drop_last="
                f"{drop_last} would be ignored: leave them out (torch's DataLoader refuses them too)"
            )
        batches, batch_size, samples_per_batch = batch_sampler, None, None
        options["batch_sampler"] = EpochTagged(order)
    elif order is None:  # an IterableDataset: its own order, batched by the DataLoader
        options.update(batch_size=batch_size, drop_last=drop_last)
        samples_per_batch = batch_size
    elif batch_size is None:  # no batching: each index is a sample
        options.update(batch_size=None, sampler=EpochTagged(order))
        samples_per_batch = None
    else:  # the batches made here, so each goes to the workers as one list with its epoch (EpochBatch)
        batches = BatchSampler(order, batch_size, drop_last)
        options["batch_sampler"] = EpochTagged(batches)
        samples_per_batch = batch_size
    if workers > 0:
        options["persistent_workers"] = True if persistent_workers is None else persistent_workers
        options["multiprocessing_context"] = worker_context(kwargs.get("multiprocessing_context"))
        options["worker_init_fn"] = WorkerInitChain(limit_worker_threads, worker_init_fn)
        if prefetch_factor is not None:
            options["prefetch_factor"] = prefetch_factor
    elif worker_init_fn is not None:
        raise LabkitValueError("worker_init_fn needs num_workers >= 1")
    loader: Iterable
    if batch_slots:
        loader = _slot_loader(image_dataset, dataset, batches, options, hang_timeout)
        inner: DataLoader = loader.loader.loader if workers else loader.loader  # type: ignore[attr-defined]
    else:
        fetched = dataset if order is None else EpochScoped(dataset)
        loader = watched_loader(fetched, hang_timeout, **options) if hang_timeout else DataLoader(fetched, **options)
        inner = loader.loader if hang_timeout else loader  # type: ignore[attr-defined]
    if workers == 0 and prefetch_factor is not None:  # loaded by a producer thread, that many batches ahead
        loader = BatchesAhead(loader, prefetch_factor)
    attributes = {name: getattr(inner, name) for name in TORCH_ATTRIBUTES}
    if workers == 0 and prefetch_factor is not None:
        attributes["prefetch_factor"] = prefetch_factor
    attributes.update(
        dataset=dataset,
        batch_size=batch_size,
        drop_last=drop_last if batch_sampler is None else False,
        timeout=kwargs.get("timeout", 0),
        worker_init_fn=worker_init_fn,
    )
    if order is not None:  # the batches made here (or given), not their epoch-tagged wrapper
        attributes["batch_sampler"] = batches
    if order is not None and batch_sampler is None:
        attributes["sampler"] = order
    if profile or (profile is None and profile_enabled()):
        loader = ProfiledLoader(loader)
    resumable = isinstance(order, ResumableSampler)
    unsaved = (
        ""
        if resumable
        else f"its order comes from {type(order).__name__ if order is not None else type(dataset).__name__}, "
        "which cannot save a place mid-epoch: use a labkit.samplers.resumable sampler (RandomPermutationSampler, "
        "BlockShuffleSampler, DistributedBlockSampler, ...)"
    )
    return StatefulLoader(
        loader,
        order if resumable else None,
        samples_per_batch,
        owns_seed=seed_drawn,
        unsaved=unsaved,
        attributes=attributes,
    )
