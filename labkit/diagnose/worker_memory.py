"""Each DataLoader worker's memory traced through several epochs: the copy-on-write lab (seed 2.1).

A forked worker starts with every page of the main process shared. What it writes, it copies;
Python writes to an object whenever it takes a reference to it (the reference count lives in the
object). `trace_worker_memory` reads each worker's private memory (pages only that worker holds)
and its RSS several times an epoch, so a lab can plot a dataset of Python objects being copied
into every worker next to one kept in numpy arrays. RSS alone does not show it: a copied page
was already counted in the worker's RSS while it was shared.

Python's cyclic garbage collector writes too: a full collection in a worker marks every container
object it inherited (lists, dicts, tuples: the whole heap of the main process), and copies their
pages. ``freeze_gc=True`` (the default) moves what the main process holds out of the collector's
reach (``gc.freeze()``) before the workers start, so what is left is what the dataset itself causes.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from labkit.core.errors import LabkitValueError
from labkit.core.shared_log import SharedLog
from labkit.measure.process_memory import private_bytes, rss_bytes, unique_anonymous_bytes

MIB = 2**20
WORKER_START_S = 30.0


class RecordWorkerPid:
    """``worker_init_fn`` that records which process each worker is (picklable, for any start method)."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def __call__(self, worker_id: int) -> None:
        self.log.append({"worker": worker_id, "pid": os.getpid()})


@dataclass
class WorkerMemoryTrace:
    """Readings of every worker's memory: at ``epochs[k]`` epochs into the run, worker w held
    ``private[w][k]`` private bytes (USS), ``anonymous[w][k]`` anonymous bytes only it holds and
    ``rss[w][k]`` resident bytes; ``None`` where the OS gave no figure (`labkit.measure.process_memory`).

    Pages of a memory-mapped file that one worker alone has read count in its RSS and USS: only
    ``anonymous`` leaves them out and grows with a leak or copy-on-write alone."""

    epochs: List[float] = field(default_factory=list)
    private: Dict[str, List[Optional[int]]] = field(default_factory=dict)
    anonymous: Dict[str, List[Optional[int]]] = field(default_factory=dict)
    rss: Dict[str, List[Optional[int]]] = field(default_factory=dict)
    start_method: str = ""

    def mib(self, kind: str = "private") -> Dict[str, np.ndarray]:
        """Each worker's ``private``, ``anonymous`` or ``rss`` readings in MiB, as arrays to plot (NaN, a gap in
        the line, where the OS gave none)."""
        return {w: np.array([np.nan if v is None else v / MIB for v in values])
                for w, values in getattr(self, kind).items()}

    def growth_mib(self, kind: str = "private") -> Dict[str, Optional[float]]:
        """MiB each worker's ``private``, ``anonymous`` or ``rss`` memory grew from the first reading to the last;
        ``None`` for a worker whose first or last reading the OS did not give."""
        out: Dict[str, Optional[float]] = {}
        for w, values in getattr(self, kind).items():
            first, last = (values[0], values[-1]) if values else (None, None)
            out[w] = None if first is None or last is None else (last - first) / MIB
        return out

    def mean_growth_mib(self, kind: str = "private") -> Optional[float]:
        """The mean of `growth_mib` over the workers whose growth is known; ``None`` if no worker's is."""
        known = [g for g in self.growth_mib(kind).values() if g is not None]
        return sum(known) / len(known) if known else None

    def plot(self, ax: Any = None, label: str = "", kind: str = "private", color: Any = None) -> Any:
        """One line per worker: MiB of ``kind`` memory against epochs."""
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(7, 3.5))[1]
        for k, (worker, values) in enumerate(self.mib(kind).items()):
            ax.plot(self.epochs, values, marker="o", color=color,
                    linestyle=("-", "--", ":", "-.")[k % 4], label=f"{label} {worker}".strip())
        ax.set_xlabel("epochs read by the main loop")
        names = {"private": "private", "anonymous": "unique anonymous", "rss": "resident (RSS)"}
        ax.set_ylabel(f"{names[kind]} memory per worker, MiB")
        return ax


def _worker_pids(log: SharedLog, workers: int) -> Dict[str, int]:
    deadline = time.monotonic() + WORKER_START_S
    while True:
        records = log.records()
        if len(records) >= workers or time.monotonic() > deadline:
            return {f"worker {r['worker']}": r["pid"] for r in sorted(records, key=lambda r: r["worker"])}
        time.sleep(0.01)


def trace_worker_memory(dataset: Dataset, epochs: int = 3, readings_per_epoch: int = 4, batch_size: int = 1000,
                        num_workers: int = 2, seed: int = 0, progress: bool = True,
                        multiprocessing_context: Optional[str] = None, freeze_gc: bool = True) -> WorkerMemoryTrace:
    """Iterate ``dataset`` in a shuffled order for ``epochs`` with persistent workers and read every
    worker's memory as soon as the workers have started, then ``readings_per_epoch`` times each epoch.

    Batches are dropped as they come: only what the workers hold is measured. ``freeze_gc``: see
    the module's docstring; the main process's objects are unfrozen again at the end.
    """
    if num_workers < 1:
        raise LabkitValueError("trace_worker_memory follows worker processes: give num_workers >= 1")
    from tqdm.auto import tqdm

    log = SharedLog("labkit-workermem-")
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                        generator=torch.Generator().manual_seed(seed), persistent_workers=True,
                        worker_init_fn=RecordWorkerPid(log), multiprocessing_context=multiprocessing_context)
    per_epoch = len(loader)
    marks = {max(1, round(k * per_epoch / readings_per_epoch)) for k in range(1, readings_per_epoch + 1)}
    method = multiprocessing_context or torch.multiprocessing.get_start_method()
    trace = WorkerMemoryTrace(start_method=method)
    pids: Dict[str, int] = {}

    def read(at: float) -> None:
        trace.epochs.append(at)
        for worker, pid in pids.items():
            trace.private.setdefault(worker, []).append(private_bytes(pid))
            trace.anonymous.setdefault(worker, []).append(unique_anonymous_bytes(pid))
            trace.rss.setdefault(worker, []).append(rss_bytes(pid))

    bar = tqdm(total=epochs * per_epoch, desc="epochs", unit="batch", disable=not progress)
    if freeze_gc:
        gc.collect()
        gc.freeze()
    try:
        for epoch in range(epochs):
            batches = iter(loader)
            if epoch == 0:  # the workers have started and are fetching their first batches
                pids = _worker_pids(log, num_workers)
                read(0.0)
            for b, _ in enumerate(batches, 1):
                bar.update()
                if b in marks:
                    read(epoch + b / per_epoch)
    finally:
        bar.close()
        del loader  # persistent workers stop with their loader
        if freeze_gc:
            gc.unfreeze()
    return trace
