"""A soak run of a loader: many epochs with persistent workers, watching for whatever grows.

A leak of one percent per epoch hides in any single epoch and ends a week-long run. `run_soak` iterates a `make_loader`
loader with persistent workers for many epochs and reads every figure the OS gives
(`labkit.measure.process_memory.read_memory`) for the main process and each worker: once every worker has delivered its
first batch (its decoder and buffers are in place by then), and at the end of each epoch (after ``gc.collect()``); and
the main process's open file descriptors (where the OS lists them). After the loader is shut down it compares open
descriptors and ``/dev/shm`` with what was there before.

The verdict reads the memory a leak grows: *unique anonymous* memory (heap and copied-on-write
pages no other process holds; USS where the OS does not separate them). A worker's is compared from
its first batch to the end of the last epoch, so that copy-on-write of Python objects it reads (which
a worker does mostly in its first epoch) counts; the main process's from the end of epoch 1, once its
pools (pinned memory, the allocator's caches) are full. RSS is reported, not judged: it also counts
the pages of mapped files read so far, which grow towards the files' size as epochs read more of a
mmap'd pack, pages the page cache shares and the kernel reclaims at will. `SoakReport.problems` names
each process whose unique memory grew more than the limit (`GROWTH_LIMIT` of it, and `GROWTH_FLOOR`
bytes), each descriptor left open and each shared-memory segment left behind; `SoakReport.notes`
splits any RSS growth into its kinds of pages.

`trace_worker_memory` is the copy-on-write lab (article §2.1), run the same way with readings several
times an epoch. A forked worker starts with every page of the main process shared. What it writes, it
copies; Python writes to an object whenever it takes a reference to it (the reference count lives in
the object). The trace reads each worker's private memory (pages only that worker holds) and its RSS,
so a lab can plot a dataset of Python objects being copied into every worker next to one kept in numpy
arrays. RSS alone does not show it: a copied page was already counted in the worker's RSS while it was
shared. Python's cyclic garbage collector writes too: a full collection in a worker marks every
container object it inherited (the whole heap of the main process) and copies their pages.
``freeze_gc=True`` (the default) moves what the main process holds out of the collector's reach
(``gc.freeze()``) before the workers start, so what is left is what the dataset itself causes.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from labkit.core.errors import LabkitValueError
from labkit.core.machine import os_name
from labkit.core.plotting import pyplot
from labkit.core.processes import process_maps, running
from labkit.core.shared_log import SharedLog
from labkit.core.timing import Deadline, Stopwatch
from labkit.measure.process_memory import MEASURES, private_bytes, read_memory, rss_bytes, unique_anonymous_bytes
from labkit.workers.loader_factory import make_loader
from labkit.workers.worker_init import WorkerInitChain

GROWTH_LIMIT = 0.10
GROWTH_FLOOR = 16 * 2**20  # a worker's first epoch leaves a few MiB behind (allocator arenas, the parent's
# objects its code touches, copied on write); growth under this many bytes is not reported, however large a share
SHM_DIR = "/dev/shm"
MAIN = "main"
THREAD_EXIT_SECONDS = 30.0
FILE_PAGES = (
    "pages of mapped files (a pack read through mmap, libraries), shared with the page cache and "
    "reclaimable: they grow towards the files' size as epochs read more of them, and are not a leak"
)


MIB = 2**20
WORKER_START_S = 30.0  # how long trace_worker_memory waits for every worker to say its pid
FD_LISTINGS = ("/proc/self/fd", "/dev/fd")  # Linux; macOS and the BSDs


class RecordWorkerPid:
    """``worker_init_fn`` that records which process each worker is (picklable, for any start method)."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def __call__(self, worker_id: int) -> None:
        self.log.append({"worker": worker_id, "pid": os.getpid()})


def _worker_pids(log: SharedLog, wait_for: int = 0) -> dict[str, int]:
    """Each worker's pid by name ("worker 0", ...) as `RecordWorkerPid` logged it, once ``wait_for`` have
    (at most `WORKER_START_S`)."""
    deadline = Deadline(WORKER_START_S)
    records = log.records()
    while len(records) < wait_for and not deadline.expired:
        time.sleep(0.01)
        records = log.records()
    return {f"worker {r['worker']}": r["pid"] for r in sorted(records, key=lambda r: r["worker"])}


def open_fds() -> int | None:
    """File descriptors this process has open; ``None`` where the OS does not list them (Windows)."""
    for listing in FD_LISTINGS:
        if os.path.isdir(listing):
            return len(os.listdir(listing)) - 1  # less the one listdir itself opened
    return None


def shm_segments() -> set[str]:
    """Names in ``/dev/shm`` (none where the OS has no such folder)."""
    return set(os.listdir(SHM_DIR)) if os.path.isdir(SHM_DIR) else set()


def _held_shm() -> set[str]:
    """Names in /dev/shm that some live process has mapped or open (those it may read)."""
    held: set[str] = set()
    prefix = SHM_DIR + "/"
    for pid, lines in process_maps():
        held.update(line.split(prefix, 1)[1].split()[0] for line in lines if prefix in line)
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix):
                    held.add(target[len(prefix) :].split()[0])
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
    return held


@dataclass
class EpochRecord:
    """What one epoch took, and what each process held at its end (bytes, by role: main, worker 0, ...;
    ``None`` where the OS does not give the figure). Epoch 0: once every worker delivered its first batch."""

    epoch: int
    seconds: float
    open_fds: int | None  # None where the OS does not list them
    rss: dict[str, int | None] = field(default_factory=dict)
    uss: dict[str, int | None] = field(default_factory=dict)
    pss: dict[str, int | None] = field(default_factory=dict)
    anonymous: dict[str, int | None] = field(default_factory=dict)
    file_backed: dict[str, int | None] = field(default_factory=dict)
    shared_memory: dict[str, int | None] = field(default_factory=dict)
    unique_anonymous: dict[str, int | None] = field(default_factory=dict)

    @classmethod
    def read(cls, epoch: int, seconds: float, pids: dict[str, int]) -> EpochRecord:
        """Read every process in ``pids`` now (a process that has ended reads as ``None``)."""
        readings = {role: read_memory(pid) for role, pid in pids.items()}
        record = cls(epoch, seconds, open_fds())
        for kind in MEASURES:
            getattr(record, kind).update({role: getattr(r, kind) if r else None for role, r in readings.items()})
        return record


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f}"


def _count(n: int | None) -> str:
    return "n/a" if n is None else str(n)


@dataclass
class SoakReport:
    """Every epoch's record, the reading after the workers' first batches, and what was left once the
    loader shut down."""

    first_batch: EpochRecord
    epochs: list[EpochRecord]
    pids: dict[str, int]
    fds_before: int | None  # None where the OS does not list open descriptors
    fds_after: int | None
    shm_left: list[str]
    workers_left: list[str]
    growth_limit: float = GROWTH_LIMIT
    growth_floor: int = GROWTH_FLOOR

    @property
    def leak_measure(self) -> str:
        """The figure the verdict reads: ``unique_anonymous`` (Linux), else ``uss``, else ``rss``."""
        last = self.epochs[-1]
        return next((kind for kind in ("unique_anonymous", "uss") if getattr(last, kind).get(MAIN) is not None), "rss")

    def baseline(self, role: str) -> EpochRecord:
        """A worker's first batch (copy-on-write of what it reads counts from there); for the main process,
        the end of epoch 1 (its pools are full by then)."""
        return self.epochs[0] if role == MAIN else self.first_batch

    def growth(self, kind: str | None = None) -> dict[str, float | None]:
        """Relative growth of each process's ``kind`` of memory (default: the verdict's, `leak_measure`)
        from its `baseline` to the end of the last epoch; ``None`` where the OS does not give it."""
        kind = kind or self.leak_measure
        out: dict[str, float | None] = {}
        for role in self.pids:
            first, last = getattr(self.baseline(role), kind).get(role), getattr(self.epochs[-1], kind).get(role)
            out[role] = None if first is None or last is None else (last / first - 1 if first else 0.0)
        return out

    def _change(self, role: str, kind: str) -> int | None:
        first, last = getattr(self.baseline(role), kind).get(role), getattr(self.epochs[-1], kind).get(role)
        return None if first is None or last is None else last - first

    def _since(self, role: str) -> str:
        return "the end of epoch 1" if role == MAIN else "its first batch"

    def problems(self) -> list[str]:
        """One line per finding, each with what to look at; empty when nothing grew or leaked."""
        out = []
        kind, n = self.leak_measure, len(self.epochs)
        label = MEASURES[kind] + (
            "" if kind == "unique_anonymous" else f" (unique anonymous memory is not available on {os_name()})"
        )
        for role, grown in self.growth().items():
            if grown is None or grown <= self.growth_limit or (self._change(role, kind) or 0) <= self.growth_floor:
                continue
            first, last = getattr(self.baseline(role), kind)[role], getattr(self.epochs[-1], kind)[role]
            where = (
                "look for Python lists or dicts of per-sample objects that the workers read (copy-on-write: "
                "reading an object writes its reference count, and the page it sits on is copied), caches "
                "without a bound, or state kept across batches"
                if role != MAIN
                else "look for what the training loop keeps across steps (losses kept as tensors, batches "
                "appended to a list), caches without a bound; or, if the workers grew too, pages they "
                "copied on write, which leaves the main process as the only holder of the original"
            )
            out.append(
                f"{role} (pid {self.pids[role]}): {label} memory grew {grown:.1%} from {self._since(role)} "
                f"to the end of epoch {n} ({_mib(first)} -> {_mib(last)} MiB), over the "
                f"{self.growth_limit:.0%} limit and {self.growth_floor / 2**20:.0f} MiB: {where}"
            )
        first, last = self.epochs[0], self.epochs[-1]
        if first.open_fds is not None and last.open_fds is not None and last.open_fds > first.open_fds:
            out.append(
                f"open file descriptors of the main process grew from {first.open_fds} at the end of epoch 1 "
                f"to {last.open_fds} at the end of epoch {n}: something opens a file per batch and keeps it"
            )
        if self.fds_before is not None and self.fds_after is not None and self.fds_after > self.fds_before:
            out.append(
                f"the main process has {self.fds_after - self.fds_before} more open file descriptors after "
                f"the loader shut down than before it started ({self.fds_before} -> {self.fds_after}); "
                "list them with ls -l /proc/<pid>/fd"
            )
        if self.shm_left:
            out.append(
                f"{SHM_DIR}: {', '.join(self.shm_left)} appeared during the run and no process holds them; "
                "whatever created them never unlinked them (remove them with rm)"
            )
        if self.workers_left:
            out.append(f"{', '.join(self.workers_left)} still running after the loader shut down")
        return out

    def _grew(self, role: str, kind: str) -> bool:
        """More than the limit, of what there was at the baseline (at least 1 MiB: shared memory may start at 0)."""
        change = self._change(role, kind)
        first = getattr(self.baseline(role), kind).get(role)
        return change is not None and first is not None and change > self.growth_limit * max(first, 2**20)

    def notes(self) -> list[str]:
        """Why RSS grew, for each process whose RSS, mapped files or shared memory grew more than the limit:
        what kind of pages grew."""
        out = []
        for role, grown in self.growth("rss").items():
            if grown is None or not any(self._grew(role, kind) for kind in ("rss", "file_backed", "shared_memory")):
                continue
            text = (
                f"{role}: RSS grew {grown:.1%} from {self._since(role)} to the end of epoch {len(self.epochs)} "
                f"({(self._change(role, 'rss') or 0) / 2**20:+.1f} MiB)"
            )
            file_backed, anonymous, shm = (
                self._change(role, kind) for kind in ("file_backed", "anonymous", "shared_memory")
            )
            if file_backed is None or anonymous is None or shm is None:
                out.append(f"{text}; which kind of pages grew is not available on {os_name()}")
            else:
                out.append(
                    f"{text}: file-backed {file_backed / 2**20:+.1f} MiB, {FILE_PAGES}; anonymous "
                    f"{anonymous / 2**20:+.1f} MiB; shared memory {shm / 2**20:+.1f} MiB"
                )
        return out

    def unavailable(self) -> list[str]:
        """The figures this OS does not give (empty on Linux)."""
        last = self.epochs[-1]
        missing = [label for kind, label in MEASURES.items() if any(v is None for v in getattr(last, kind).values())]
        return missing + (["open file descriptors"] if last.open_fds is None else [])

    def summary(self) -> str:
        """A table of each process's memory after the first batches, at the end of epoch 1 and of the
        last epoch; then the findings, and what explains any RSS growth."""
        n, verdict = len(self.epochs), self.leak_measure
        readings = (self.first_batch, self.epochs[0], self.epochs[-1])
        lines = [
            f"MiB after every worker's first batch, at the end of epoch 1 and of epoch {n}; growth from a "
            "worker's first batch, or from the main process's epoch 1",
            f"{'process':<10}{'memory':<18}{'first batch':>12}{'epoch 1':>10}{f'epoch {n}':>10}{'growth':>9}",
        ]
        for role in self.pids:
            growth = {kind: self.growth(kind)[role] for kind in MEASURES}
            for kind, label in MEASURES.items():
                mark = " *" if kind == verdict else ""
                cells = "".join(f"{_mib(getattr(r, kind).get(role)):>{w}}" for r, w in zip(readings, (12, 10, 10)))
                grown = "n/a" if growth[kind] is None else f"{growth[kind]:.1%}"
                lines.append(f"{role if kind == 'rss' else '':<10}{label + mark:<18}{cells}{grown:>9}")
        lines.append(
            f"* the verdict's measure: what a leak or copy-on-write grows (limit: {self.growth_limit:.0%} "
            f"and {self.growth_floor / 2**20:.0f} MiB)"
        )
        missing = self.unavailable()
        if missing:
            lines.append(f"n/a: {', '.join(missing)} not available on {os_name()}")
        first, last = self.epochs[0], self.epochs[-1]
        fds = (self.fds_before, first.open_fds, last.open_fds, self.fds_after)
        lines.append(
            f"open fds of main: {_count(fds[0])} before, {_count(fds[1])} after epoch 1, {_count(fds[2])} "
            f"after epoch {n}, {_count(fds[3])} after shutdown; {len(self.shm_left)} /dev/shm segments left"
        )
        found = self.problems()
        lines += (
            [f"PROBLEM: {p}" for p in found]
            if found
            else [
                f"ok: no process's {MEASURES[verdict]} memory grew more than {self.growth_limit:.0%} and "
                f"{self.growth_floor / 2**20:.0f} MiB, nothing leaked"
            ]
        )
        lines += [f"note: {note}" for note in self.notes()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "leak_measure": self.leak_measure,
            **{f"growth_{kind}": self.growth(kind) for kind in MEASURES},
            "problems": self.problems(),
            "notes": self.notes(),
            "not_available": self.unavailable(),
        }


def _one_epoch(
    loader: Any, step: Callable[[Any], Any] | None, after_batch: Callable[[int], None] | None = None
) -> float:
    """Seconds to iterate ``loader`` once, calling ``after_batch(batches so far)``; no batch outlives the call."""
    watch = Stopwatch()
    for count, batch in enumerate(loader, 1):
        if step is not None:
            step(batch)
        if after_batch is not None:
            after_batch(count)
    return watch.elapsed


def join_threads_started_since(before: set[threading.Thread], timeout: float = THREAD_EXIT_SECONDS) -> None:
    """Wait for the threads the loader started to end: a multiprocessing queue's feeder thread closes
    the queue's pipe as it exits, after the loader has shut down, so counting descriptors before then
    would report a leak that is only late."""
    deadline = Deadline(timeout)
    for thread in set(threading.enumerate()) - before:
        if thread is not threading.current_thread():
            thread.join(deadline.remaining)


def run_soak(
    dataset: Dataset,
    epochs: int = 20,
    batch_size: int = 64,
    num_workers: int = 2,
    step: Callable[[Any], Any] | None = None,
    growth_limit: float = GROWTH_LIMIT,
    growth_floor: int = GROWTH_FLOOR,
    progress: bool = False,
    **loader_kwargs: Any,
) -> SoakReport:
    """Iterate ``dataset`` for ``epochs`` through `make_loader` with persistent workers, calling
    ``step(batch)`` on each batch (your training step, or nothing), and record what every process held.

    ``loader_kwargs`` go to `make_loader` (a sampler, a collate function, ...); workers are always
    persistent, so each row of the report follows one process from the first epoch to the last.
    A reading takes ~0.1 s a process (it walks every page table), once after the first
    ``num_workers`` batches of epoch 1 (batches come from the workers in turn) and once per epoch.
    Descriptors are counted after the threads started during the run have ended (at most
    `THREAD_EXIT_SECONDS`), since the loader's queues close their pipes from their own threads.
    """
    if epochs < 2:
        raise LabkitValueError(f"epochs={epochs}: growth is measured from the end of epoch 1, so soak at least 2")
    pid_log = SharedLog("labkit-soak-pids-")
    if num_workers > 0:
        loader_kwargs.update(
            persistent_workers=True,
            worker_init_fn=WorkerInitChain(RecordWorkerPid(pid_log), loader_kwargs.get("worker_init_fn")),
        )
    gc.collect()
    fds_before, shm_before = open_fds(), shm_segments()
    threads_before = set(threading.enumerate())
    loader = make_loader(dataset, batch_size=batch_size, num_workers=num_workers, **loader_kwargs)
    records: list[EpochRecord] = []
    warm: list[EpochRecord] = []
    started = Stopwatch()

    def processes() -> dict[str, int]:
        return {MAIN: os.getpid(), **_worker_pids(pid_log)}

    def once_every_worker_delivered(count: int) -> None:
        if not warm and count >= num_workers:
            warm.append(EpochRecord.read(0, started.elapsed, processes()))

    rounds = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        rounds = tqdm(rounds, desc="soak", unit="epoch")
    for epoch in rounds:
        seconds = _one_epoch(loader, step, once_every_worker_delivered if not warm else None)
        gc.collect()
        records.append(EpochRecord.read(epoch + 1, seconds, processes()))
        if not warm:  # fewer batches in an epoch than workers: the end of epoch 1 is the first reading
            warm.append(records[-1])
    pids = processes()
    del loader  # persistent workers stop when the last reference to their loader goes
    gc.collect()
    join_threads_started_since(threads_before)
    workers_left = [f"{role} (pid {pid})" for role, pid in pids.items() if role != MAIN and running(pid)]
    new_shm = shm_segments() - shm_before
    left = sorted(new_shm - _held_shm()) if new_shm else []
    return SoakReport(warm[0], records, pids, fds_before, open_fds(), left, workers_left, growth_limit, growth_floor)


@dataclass
class WorkerMemoryTrace:
    """Readings of every worker's memory: at ``epochs[k]`` epochs into the run, worker w held
    ``private[w][k]`` private bytes (USS), ``anonymous[w][k]`` anonymous bytes only it holds and
    ``rss[w][k]`` resident bytes; ``None`` where the OS gave no figure (`labkit.measure.process_memory`).

    Pages of a memory-mapped file that one worker alone has read count in its RSS and USS: only
    ``anonymous`` leaves them out and grows with a leak or copy-on-write alone."""

    epochs: list[float] = field(default_factory=list)
    private: dict[str, list[int | None]] = field(default_factory=dict)
    anonymous: dict[str, list[int | None]] = field(default_factory=dict)
    rss: dict[str, list[int | None]] = field(default_factory=dict)
    start_method: str = ""

    def mib(self, kind: str = "private") -> dict[str, np.ndarray]:
        """Each worker's ``private``, ``anonymous`` or ``rss`` readings in MiB, as arrays to plot (NaN, a gap in
        the line, where the OS gave none)."""
        return {
            w: np.array([np.nan if v is None else v / MIB for v in values]) for w, values in getattr(self, kind).items()
        }

    def growth_mib(self, kind: str = "private") -> dict[str, float | None]:
        """MiB each worker's ``private``, ``anonymous`` or ``rss`` memory grew from the first reading to the last;
        ``None`` for a worker whose first or last reading the OS did not give."""
        out: dict[str, float | None] = {}
        for w, values in getattr(self, kind).items():
            first, last = (values[0], values[-1]) if values else (None, None)
            out[w] = None if first is None or last is None else (last - first) / MIB
        return out

    def mean_growth_mib(self, kind: str = "private") -> float | None:
        """The mean of `growth_mib` over the workers whose growth is known; ``None`` if no worker's is."""
        known = [g for g in self.growth_mib(kind).values() if g is not None]
        return sum(known) / len(known) if known else None

    def plot(self, ax: Any = None, label: str = "", kind: str = "private", color: Any = None) -> Any:
        """One line per worker: MiB of ``kind`` memory against epochs."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(7, 3.5))[1]
        for k, (worker, values) in enumerate(self.mib(kind).items()):
            ax.plot(
                self.epochs,
                values,
                marker="o",
                color=color,
                linestyle=("-", "--", ":", "-.")[k % 4],
                label=f"{label} {worker}".strip(),
            )
        ax.set_xlabel("epochs read by the main loop")
        names = {"private": "private", "anonymous": "unique anonymous", "rss": "resident (RSS)"}
        ax.set_ylabel(f"{names[kind]} memory per worker, MiB")
        return ax


def trace_worker_memory(
    dataset: Dataset,
    epochs: int = 3,
    readings_per_epoch: int = 4,
    batch_size: int = 1000,
    num_workers: int = 2,
    seed: int = 0,
    progress: bool = True,
    multiprocessing_context: str | None = None,
    freeze_gc: bool = True,
) -> WorkerMemoryTrace:
    """Iterate ``dataset`` in a shuffled order for ``epochs`` with persistent workers and read every
    worker's memory as soon as the workers have started, then ``readings_per_epoch`` times each epoch.

    Batches are dropped as they come: only what the workers hold is measured. ``freeze_gc``: see
    the module's docstring; the main process's objects are unfrozen again at the end.
    """
    if num_workers < 1:
        raise LabkitValueError("trace_worker_memory follows worker processes: give num_workers >= 1")
    from tqdm.auto import tqdm

    log = SharedLog("labkit-workermem-")
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed),
        persistent_workers=True,
        worker_init_fn=RecordWorkerPid(log),
        multiprocessing_context=multiprocessing_context,
    )
    per_epoch = len(loader)
    marks = {max(1, round(k * per_epoch / readings_per_epoch)) for k in range(1, readings_per_epoch + 1)}
    method = multiprocessing_context or torch.multiprocessing.get_start_method()
    trace = WorkerMemoryTrace(start_method=method)
    pids: dict[str, int] = {}

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
