"""How many threads each process of a loader may run, so workers and the main process do not oversubscribe.

A DataLoader worker inherits torch's thread count (every core) and OpenMP/BLAS/OpenCV defaults; N
workers each running that many threads fight over the same cores. `limit_worker_threads` is the
``worker_init_fn`` that gives each worker one; `main_thread_budget` the main process what the
workers leave; `torch_threads` scopes a count to a block.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import torch

from labkit.core.cpus import cpu_budget
from labkit.core.environment import usable_cpus

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def threads_per_worker() -> tuple[int, list[str]]:
    """How many threads a worker's native libraries may start, and which libraries say so."""
    sources = []
    counts = []
    for name in THREAD_ENV:
        if os.environ.get(name, "").isdigit():
            counts.append(int(os.environ[name]))
            sources.append(f"{name}={os.environ[name]}")
    if not counts:
        counts.append(usable_cpus())
        sources.append(f"OpenMP default ({usable_cpus()}: no {'/'.join(THREAD_ENV)} set)")
    cv2 = sys.modules.get("cv2")
    if cv2 is not None and cv2.getNumThreads() > 1:
        counts.append(cv2.getNumThreads())
        sources.append(f"OpenCV {cv2.getNumThreads()}")
    return max(counts), sources


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch threads in this process (``None``: as many as now), then
    put the previous count back, so a measurement's thread budget does not leak into the next."""
    before = torch.get_num_threads()
    torch.set_num_threads(count or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def main_thread_budget(workers: int, cpus: int | None = None) -> int:
    """torch threads for the main process: the rank's CPUs (`labkit.core.cpus`) its ``workers`` leave, at
    least one."""
    return cpu_budget(cpus=cpus).main_threads(workers)


def limit_worker_threads(worker_id: int) -> None:
    """``worker_init_fn``: one thread per worker for torch, OpenMP/BLAS libraries loaded later, and OpenCV."""
    torch.set_num_threads(1)
    for name in THREAD_ENV:
        os.environ[name] = "1"
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        cv2.setNumThreads(1)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)
