"""Page faults of a process and its DataLoader workers, as the kernel counts them (Linux ``/proc``).

A minor fault is the kernel mapping a page into a process on first touch: zeroing a freshly
allocated page, or mapping one that another process already holds (a shared-memory batch
arriving from a worker). A loader that puts every batch in a fresh /dev/shm segment pays
for each of its pages this way, in the worker that writes it and again in the process that
reads it; memory allocated once and reused pays once. Counting faults shows that cost
without a profiler. ``None`` where ``/proc`` is not there (macOS, Windows): not known, not zero.
"""

from __future__ import annotations

import mmap
import os
import statistics
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from labkit.core.errors import LabkitValueError
from labkit.core.timing import Stopwatch
from labkit.measure.process_memory import Pid, descendants

_MINFLT = 7  # index of minflt among the fields after "pid (comm)" in /proc/<pid>/stat


def can_count_faults() -> bool:
    """True where the kernel reports page faults per process (Linux ``/proc``)."""
    return os.path.exists("/proc/self/stat")


def minor_faults(pid: Pid = None) -> int | None:
    """Minor page faults ``pid`` (this process by default) has taken since it started; ``None`` if it is gone or the
    OS does not count them."""
    try:
        with open(f"/proc/{'self' if pid is None else int(pid)}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
        return int(text[text.rfind(")") + 2 :].split()[_MINFLT])
    except (OSError, IndexError, ValueError):
        return None


def tree_minor_faults(pid: int | None = None) -> int | None:
    """Minor faults of ``pid`` (this process by default) plus those of every live process below it;
    ``None`` where the OS does not count them (`can_count_faults`) or ``pid`` is gone.

    Take it before and after a stretch of work with persistent workers; a worker that exits in
    between takes its count with it (one that ends while being read adds nothing)."""
    root = os.getpid() if pid is None else pid
    own = minor_faults(root)
    if own is None:
        return None
    return own + sum(faults for faults in map(minor_faults, descendants(root)) if faults is not None)


def fault_seconds(pages: int = 2048, repeats: int = 5) -> float:
    """What one minor fault on fresh shared memory costs here, in seconds: writing a new shared-memory segment of
    ``pages`` pages (each faulted in on first touch, as a plain DataLoader's batch is in its worker) less writing
    it again once mapped, per page; the median over ``repeats`` fresh segments.

    Multiplied by the faults a change saves, it predicts what the change can gain before a timing is noisy enough
    to hide it. Works wherever shared memory does; on Linux `minor_faults` confirms the pages were faulted."""
    if pages < 1 or repeats < 1:
        raise LabkitValueError(f"fault_seconds(pages={pages}, repeats={repeats}): both at least 1")
    costs = []
    for _ in range(repeats):
        segment = SharedMemory(create=True, size=pages * mmap.PAGESIZE)
        try:
            view = np.ndarray(pages * mmap.PAGESIZE, dtype=np.uint8, buffer=segment.buf)
            watch = Stopwatch()
            view.fill(1)
            first = watch.elapsed
            watch = Stopwatch()
            view.fill(2)
            again = watch.elapsed
            del view  # the segment cannot close while a view holds its buffer
        finally:
            segment.close()
            segment.unlink()
        costs.append(max(0.0, first - again) / pages)
    return statistics.median(costs)
