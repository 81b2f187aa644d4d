"""Small pieces notebook 04 uses to look inside a DataLoader's workers: whose state a dataset keeps, and how long
each batch kept the training loop waiting.

* `CallCountingDataset` — each sample says which process made it and how many samples that process's copy of the
  dataset had made by then. Seed 3.1 warns that with ``persistent_workers=True`` state kept in ``__getitem__``
  lives on into the next epoch; counting calls per process shows where that state lives (in each worker's copy,
  never in the main process's) and when it starts again (new worker processes, every epoch, without persistence).
* `calls_by_process` — one epoch of such a loader, summed up per worker process.
* `time_batch_waits` — one epoch with a simulated training step after every batch, and the wait for each batch:
  what a straggler (article §6.4) costs the loop, and what ``prefetch_factor`` or ``in_order=False`` win back.

They live in labkit, not in the notebook, because DataLoader workers started by spawn or forkserver must be able
to import the dataset's class.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import Dataset

from labkit.core.errors import LabkitIndexError, LabkitValueError
from labkit.core.timing import Stopwatch, timed


class CallCountingDataset(Dataset):
    """``n`` samples; sample ``i`` is ``(i, pid, calls)``: the id of the process that made it, and how many samples
    this copy of the dataset had made in that process, this one included.

    ``calls`` is ordinary instance state, as a cache, a counter or an open file would be: every worker counts in its
    own copy (unpickled, or inherited by fork, when it starts), and the main process's copy stays at 0 whatever the
    workers do.
    """

    def __init__(self, n: int) -> None:
        if n < 1:
            raise LabkitValueError(f"n={n}: a dataset of at least 1 sample")
        self.n = int(n)
        self.calls = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, int, int]:
        if not -self.n <= index < self.n:
            raise LabkitIndexError(f"sample {index} of a dataset of {self.n}: indices run from 0 to {self.n - 1}")
        self.calls += 1
        return int(index) % self.n, os.getpid(), self.calls


@dataclass(frozen=True)
class ProcessCalls:
    """What one process's copy of a `CallCountingDataset` did in one epoch: its counter at the first and the last
    sample it made, and how many samples it made."""

    first: int
    last: int
    samples: int


def calls_by_process(batches: Iterable[Any]) -> dict[int, ProcessCalls]:
    """One epoch of a loader over a `CallCountingDataset` (batches of ``(indices, pids, calls)``, as the default
    collate makes them, or single samples with ``batch_size=None``): process id -> `ProcessCalls`."""
    seen: dict[int, list[int]] = {}
    for _indices, pids, calls in batches:
        pid_list = pids.tolist() if hasattr(pids, "tolist") else [pids]
        call_list = calls.tolist() if hasattr(calls, "tolist") else [calls]
        if not isinstance(pid_list, list):  # a 0-d tensor
            pid_list, call_list = [pid_list], [call_list]
        for pid, count in zip(pid_list, call_list):
            seen.setdefault(int(pid), []).append(int(count))
    return {pid: ProcessCalls(min(counts), max(counts), len(counts)) for pid, counts in seen.items()}


@dataclass
class BatchWaits:
    """One epoch as the training loop saw it. ``waits_s``: for each batch after the start-up ones, how long the loop
    waited for it; ``first_s``: from asking for the loader's iterator to the arrival of the last start-up batch
    (worker start-up and the first fetches); ``total_s``: from then to the end of the last step, the loop's steps
    included and the workers' shutdown after it not; ``keys``: ``key(batch)`` of every batch, start-up ones
    included, in the order they came."""

    waits_s: list[float]
    first_s: float
    total_s: float
    keys: list[Any] = field(default_factory=list)

    @property
    def worst_s(self) -> float:
        """The longest wait after the start-up batches (0 when there was none)."""
        return max(self.waits_s, default=0.0)

    def percentile_s(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the waits after the start-up batches, nearest rank."""
        if not 0 <= q <= 100:
            raise LabkitValueError(f"q={q}: a percentile from 0 to 100")
        if not self.waits_s:
            return 0.0
        ordered = sorted(self.waits_s)
        return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered))) - 1))]


def time_batch_waits(
    loader: Iterable[Any], step_s: float = 0.0, key: Callable[[Any], Any] | None = None, startup_batches: int = 1
) -> BatchWaits:
    """Iterate one epoch of ``loader``, sleeping ``step_s`` after every batch (a training step that leaves the CPU
    to the workers, as one on a GPU does), and time the wait for each batch.

    The first ``startup_batches`` batches are start-up, not waits: with ``num_workers`` workers started together,
    each worker's first batch waits for that worker to start, so pass ``num_workers`` to leave them out."""
    if step_s < 0:
        raise LabkitValueError(f"step_s={step_s}: a step of 0 s or more")
    if startup_batches < 1:
        raise LabkitValueError(f"startup_batches={startup_batches}: at least the first batch is start-up")
    waits: list[float] = []
    keys: list[Any] = []
    first: float | None = None
    watch = Stopwatch()
    arrived = 0.0
    for seen, (waited, batch) in enumerate(timed(loader), 1):
        now = watch.elapsed
        if seen <= startup_batches:
            first, arrived = now, now
        else:
            waits.append(waited)
        if key is not None:
            keys.append(key(batch))
        if step_s:
            time.sleep(step_s)
        done = watch.elapsed  # the end of the last step: shutting the workers down is not the epoch's
    if first is None:
        raise LabkitValueError("the loader produced no batch: is the dataset empty?")
    return BatchWaits(waits, first, done - arrived, keys)
