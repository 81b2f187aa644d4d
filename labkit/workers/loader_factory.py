"""labkit's loader factory: a DataLoader with sound defaults, and the switches that need no code change.

`make_loader` picks what this kit measures to be right for uint8 image datasets (uint8
stacking, pinned memory where CUDA exists, persistent workers, one thread per worker), and
adds two optional layers: ``LABKIT_PROFILE=1`` in the environment (or ``profile=True``) prints
a wait/compute report at the end of every epoch (seed section 8's "profile switch"), and
``hang_timeout=`` turns a stuck worker into an explained error (`labkit.workers.watchdog`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from labkit.collate.collate_fns import stack_uint8
from labkit.core.environment import profile_enabled, usable_cpus
from labkit.core.errors import LabkitValueError
from labkit.datasets.map_style import LabeledImageDataset
from labkit.workers.profiled_loader import ProfiledLoader
from labkit.workers.thread_budget import limit_worker_threads
from labkit.workers.watchdog import watched_loader
from labkit.workers.worker_init import WorkerInitChain


def make_loader(dataset: Dataset, batch_size: int = 64, shuffle: bool = True, sampler: Optional[Sampler] = None,
                num_workers: Optional[int] = None, collate_fn: Optional[Callable] = None,
                pin_memory: Optional[bool] = None, prefetch_factor: Optional[int] = None,
                persistent_workers: Optional[bool] = None, worker_init_fn: Optional[Callable[[int], None]] = None,
                profile: Optional[bool] = None, hang_timeout: Optional[float] = None, **kwargs: Any) -> Iterable:
    """A DataLoader over ``dataset``; every argument left as ``None`` gets labkit's default.

    Defaults: ``num_workers`` = usable CPUs less one (at least 1, at most 8);
    ``collate_fn`` = `stack_uint8` for labkit image datasets; ``pin_memory`` where CUDA
    exists; ``persistent_workers`` when there are workers; one native thread per worker.
    """
    workers = max(1, min(8, usable_cpus() - 1)) if num_workers is None else num_workers
    if collate_fn is None and isinstance(dataset, LabeledImageDataset):
        collate_fn = stack_uint8
    options = dict(batch_size=batch_size, num_workers=workers, collate_fn=collate_fn,
                   pin_memory=torch.cuda.is_available() if pin_memory is None else pin_memory, **kwargs)
    if sampler is not None:
        options["sampler"] = sampler
    else:
        options["shuffle"] = shuffle
    if workers > 0:
        options["persistent_workers"] = True if persistent_workers is None else persistent_workers
        options["worker_init_fn"] = WorkerInitChain(limit_worker_threads, worker_init_fn)
        if prefetch_factor is not None:
            options["prefetch_factor"] = prefetch_factor
    elif worker_init_fn is not None:
        raise LabkitValueError("worker_init_fn needs num_workers >= 1")
    loader: Iterable = (watched_loader(dataset, hang_timeout, **options) if hang_timeout
                        else DataLoader(dataset, **options))
    if profile or (profile is None and profile_enabled()):
        loader = ProfiledLoader(loader)
    return loader
