"""Deliberately broken loader pieces: each reproduces one failure of article section 6 on any machine.

The troubleshooting lab (``notebooks/10_troubleshooting``) runs each of them under a time limit,
watches it fail the way real loaders fail, then fixes it. They live in labkit, not in a notebook,
because DataLoader workers started by spawn or forkserver must be able to import them.

* `StuckAt` — some samples never come back (a read from a network mount that stopped answering).
* `KilledAt` — the worker fetching some sample is killed, as the out-of-memory killer does.
* `SlowAt` — a few samples take far longer than the rest: seed 6.4's stragglers.
* `HoardingCollate` — a collate function that keeps every batch it made: memory that grows every step.
* `LockedDataset` with `hold_lock` — a lock held by a thread at the moment of fork (article §6.5).
* `IndexedDataset` — each sample with its index, so a lab can count what a training loop saw.
* `SplitInInit` — a random subset picked and sorted in ``__init__`` by seeding torch's global generator:
  rebuilt every epoch, its loader repeats one order (article §6.2).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch.utils.data import Dataset, get_worker_info

from labkit.collate.batching import stack_uint8
from labkit.core.errors import LabkitRuntimeError, LabkitValueError
from labkit.core.pass_through import PassThrough


class _Wrapper(PassThrough, Dataset):
    """Passes samples through; ``sample_path``, ``labels``... of the wrapped dataset stay reachable."""

    wraps = "dataset"

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]


def wait_for_dead_mount(seconds: float) -> None:
    """Stands in for a read from a network file system that stopped answering: it just does not return."""
    time.sleep(seconds)


class StuckAt(_Wrapper):
    """``dataset`` whose samples ``indices`` take ``seconds`` (ten minutes by default) to come back."""

    def __init__(self, dataset: Dataset, indices: Iterable[int], seconds: float = 600.0) -> None:
        super().__init__(dataset)
        self.indices, self.seconds = {int(i) for i in indices}, seconds

    def __getitem__(self, index: int) -> Any:
        if index in self.indices:
            wait_for_dead_mount(self.seconds)
        return self.dataset[index]


class KilledAt(_Wrapper):
    """``dataset`` whose worker is killed (SIGKILL, as by the out-of-memory killer) when it fetches ``indices``.

    In the main process (``num_workers=0``) it raises instead: it must never kill your kernel."""

    def __init__(self, dataset: Dataset, indices: Iterable[int]) -> None:
        super().__init__(dataset)
        self.indices = {int(i) for i in indices}

    def __getitem__(self, index: int) -> Any:
        if index in self.indices:
            if get_worker_info() is None:
                raise LabkitRuntimeError(
                    f"KilledAt would kill the main process at sample {index}: use it with num_workers >= 1"
                )
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        return self.dataset[index]


class SlowAt(_Wrapper):
    """``dataset`` whose samples in ``delays`` take that many seconds longer: a file on a slow disk,
    or one far larger than the rest."""

    def __init__(self, dataset: Dataset, delays: Mapping[int, float]) -> None:
        super().__init__(dataset)
        self.delays = {int(i): float(s) for i, s in delays.items()}

    def __getitem__(self, index: int) -> Any:
        if index in self.delays:
            time.sleep(self.delays[index])
        return self.dataset[index]


class HoardingCollate:
    """``collate`` that also keeps every batch it made, in a list nobody empties (a debugging aid left
    in, a cache of "recent batches" for mixing): each worker's memory grows by a batch per batch."""

    def __init__(self, collate: Callable[[list[Any]], Any] = stack_uint8) -> None:
        self.collate = collate
        self.kept: list[Any] = []

    def __call__(self, batch: list[Any]) -> Any:
        out = self.collate(batch)
        self.kept.append(out)
        return out


_RESOURCE_LOCK = threading.Lock()  # a module-level lock, like those inside logging handlers or thread pools


class LockHolder:
    """A background thread — metrics, logging, a prefetching pool — that holds this module's lock, as
    such threads now and then do at the moment a DataLoader forks its workers."""

    def __init__(self, seconds: float) -> None:
        self._release = threading.Event()
        taken = threading.Event()

        def hold() -> None:
            with _RESOURCE_LOCK:
                taken.set()
                self._release.wait(seconds)

        self.thread = threading.Thread(target=hold, name="holds-a-lock", daemon=True)
        self.thread.start()
        taken.wait()

    @property
    def holding(self) -> bool:
        return self.thread.is_alive()

    def release(self) -> None:
        self._release.set()
        self.thread.join()


def hold_lock(seconds: float) -> LockHolder:
    """Take this module's lock in a new thread and hold it for ``seconds`` or until ``release()``."""
    return LockHolder(seconds)


class LockedDataset(_Wrapper):
    """``dataset`` whose ``__getitem__`` takes this module's lock, as code that logs or uses a shared
    pool does. A worker forked while another thread holds the lock inherits it locked, with no thread
    left to release it: it waits forever (article §6.5)."""

    def __getitem__(self, index: int) -> Any:
        with _RESOURCE_LOCK:
            return self.dataset[index]


class IndexedDataset(_Wrapper):
    """``(index, *sample)`` for each sample, so a training loop can count which samples it consumed."""

    def __getitem__(self, index: int) -> Any:
        sample = self.dataset[index]
        return (index, *sample) if isinstance(sample, tuple) else (index, sample)


class SplitInInit(_Wrapper):
    """``keep`` samples of ``dataset`` picked at random in ``__init__`` and kept sorted: "a reproducible split",
    as many training scripts write it, with ``torch.manual_seed(seed)`` then ``torch.randperm``.

    Seeding torch's global generator also fixes the seed that ``RandomSampler`` draws from it at the start of
    each epoch. A script that builds its dataset and loader anew every epoch therefore reads every epoch in
    the same order, with ``shuffle=True`` (article §6.2: state fixed in ``__init__``). ``global_seed=False``
    draws the split from a generator of its own and leaves the global one alone.
    """

    def __init__(self, dataset: Dataset, keep: int, seed: int = 0, global_seed: bool = True) -> None:
        super().__init__(dataset)
        n = len(dataset)  # type: ignore[arg-type]
        if not 0 < keep <= n:
            raise LabkitValueError(f"keep={keep}: between 1 and the dataset's {n} samples")
        if global_seed:
            torch.manual_seed(seed)
            order = torch.randperm(n)
        else:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        self.kept = sorted(order[:keep].tolist())

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[self.kept[index]]
