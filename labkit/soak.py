"""A soak run of a loader: many epochs with persistent workers, watching for whatever grows.

A leak of one percent per epoch hides in any single epoch and ends a week-long run. `run_soak`
iterates a `make_loader` loader with persistent workers for many epochs and, at the end of each
epoch (after ``gc.collect()``), reads the resident, anonymous and private memory of the main process
and of every worker, and the main process's open file descriptors. Anonymous memory (the heap) is
where a leak shows; RSS also counts the pages of mmap'd files read so far, which grow towards the
files' size as epochs read more of them and then stop; private memory counts library pages that no
other process maps, so it moves when other programs load or drop the same libraries. After the loader is shut down it
compares open descriptors and ``/dev/shm`` with what was there before. `SoakReport.problems`
names each process whose RSS grew more than the limit from the end of the first epoch (when
caches and copy-on-write have settled) to the end of the last, each descriptor left open and each
shared-memory segment left behind.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Set

from torch.utils.data import Dataset

from labkit.eventlog import SharedLog
from labkit.loader import make_loader
from labkit.procmem import anonymous_bytes, private_bytes, rss_bytes, running

GROWTH_LIMIT = 0.10
SHM_DIR = "/dev/shm"
MAIN = "main"
THREAD_EXIT_SECONDS = 30.0


def open_fds() -> int:
    """File descriptors this process has open (0 where the OS does not list them)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        if os.path.isdir(listing):
            return len(os.listdir(listing)) - 1  # less the one listdir itself opened
    return 0


def shm_segments() -> Set[str]:
    """Names in ``/dev/shm`` (none where the OS has no such folder)."""
    return set(os.listdir(SHM_DIR)) if os.path.isdir(SHM_DIR) else set()


def _held_shm() -> Set[str]:
    """Names in /dev/shm that some live process has mapped or open (those it may read)."""
    held: Set[str] = set()
    prefix = SHM_DIR + "/"
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else []):
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
                held.update(line.split(prefix, 1)[1].split()[0] for line in f if prefix in line)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix):
                    held.add(target[len(prefix):].split()[0])
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
    return held


class _RecordWorkerPid:
    """``worker_init_fn`` that notes which process each worker is, then runs yours (picklable for spawn)."""

    def __init__(self, log: SharedLog, user_init: Optional[Callable[[int], None]]) -> None:
        self.log, self.user_init = log, user_init

    def __call__(self, worker_id: int) -> None:
        self.log.append({"worker": worker_id, "pid": os.getpid()})
        if self.user_init is not None:
            self.user_init(worker_id)


@dataclass
class EpochRecord:
    """What one epoch took, and what each process held at its end (bytes, by role: main, worker 0, ...)."""

    epoch: int
    seconds: float
    rss: Dict[str, int]
    anonymous: Dict[str, int]
    private: Dict[str, int]
    open_fds: int


@dataclass
class SoakReport:
    """Every epoch's record, and what was left once the loader shut down."""

    epochs: List[EpochRecord]
    pids: Dict[str, int]
    fds_before: int
    fds_after: int
    shm_left: List[str]
    workers_left: List[str]
    growth_limit: float = GROWTH_LIMIT

    def growth(self, kind: str = "rss") -> Dict[str, float]:
        """Relative growth of each process's ``rss``, ``anonymous`` or ``private`` memory from the end of
        the first epoch to the end of the last."""
        first, last = getattr(self.epochs[0], kind), getattr(self.epochs[-1], kind)
        return {role: last[role] / first[role] - 1 if first[role] else 0.0 for role in first}

    def problems(self) -> List[str]:
        """One line per finding, each with what to look at; empty when nothing grew or leaked."""
        out = []
        first, last, n = self.epochs[0], self.epochs[-1], len(self.epochs)
        for role, grown in self.growth().items():
            if grown > self.growth_limit:
                out.append(f"{role} (pid {self.pids[role]}): RSS grew {grown:.1%} from the end of epoch 1 to the "
                           f"end of epoch {n} ({first.rss[role] / 2**20:.0f} -> {last.rss[role] / 2**20:.0f} MiB), "
                           f"over the {self.growth_limit:.0%} limit: look for Python lists or dicts of per-sample "
                           "objects (copy-on-write), caches without a bound, or state kept across batches")
        if last.open_fds > first.open_fds:
            out.append(f"open file descriptors of the main process grew from {first.open_fds} at the end of epoch 1 "
                       f"to {last.open_fds} at the end of epoch {n}: something opens a file per batch and keeps it")
        if self.fds_after > self.fds_before:
            out.append(f"the main process has {self.fds_after - self.fds_before} more open file descriptors after "
                       f"the loader shut down than before it started ({self.fds_before} -> {self.fds_after}); "
                       "list them with ls -l /proc/<pid>/fd")
        if self.shm_left:
            out.append(f"{SHM_DIR}: {', '.join(self.shm_left)} appeared during the run and no process holds them; "
                       "whatever created them never unlinked them (remove them with rm)")
        if self.workers_left:
            out.append(f"{', '.join(self.workers_left)} still running after the loader shut down")
        return out

    def summary(self) -> str:
        """A table of memory per process at the end of the first and last epoch, then the findings."""
        first, last = self.epochs[0], self.epochs[-1]
        kinds = (("rss", "RSS"), ("anonymous", "anonymous"), ("private", "private"))
        lines = [f"MiB at the end of epoch 1 -> epoch {len(self.epochs)}, and the growth",
                 f"{'process':<10}" + "".join(f" {label:>24}" for _, label in kinds)]
        for role in first.rss:
            cells = [(getattr(first, kind)[role], getattr(last, kind)[role], self.growth(kind)[role])
                     for kind, _ in kinds]
            lines.append(f"{role:<10}" + "".join(f" {a / 2**20:7.1f} -> {b / 2**20:6.1f} {g:7.1%}"
                                                 for a, b, g in cells))
        lines.append(f"open fds of main: {self.fds_before} before, {first.open_fds} after epoch 1, {last.open_fds} "
                     f"after epoch {len(self.epochs)}, {self.fds_after} after shutdown; "
                     f"{len(self.shm_left)} /dev/shm segments left")
        found = self.problems()
        lines += [f"PROBLEM: {p}" for p in found] if found else [
            f"ok: no RSS grew more than {self.growth_limit:.0%} after epoch 1, nothing leaked"]
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), **{f"growth_{kind}": self.growth(kind) for kind in ("rss", "anonymous", "private")},
                "problems": self.problems()}


def _one_epoch(loader: Any, step: Optional[Callable[[Any], Any]]) -> float:
    """Seconds to iterate ``loader`` once; no batch outlives the call."""
    start = time.perf_counter()
    for batch in loader:
        if step is not None:
            step(batch)
    return time.perf_counter() - start


def _join_threads_started_since(before: Set[threading.Thread], timeout: float = THREAD_EXIT_SECONDS) -> None:
    """Wait for the threads the loader started to end: a multiprocessing queue's feeder thread closes
    the queue's pipe as it exits, after the loader has shut down, so counting descriptors before then
    would report a leak that is only late."""
    deadline = time.monotonic() + timeout
    for thread in set(threading.enumerate()) - before:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def run_soak(dataset: Dataset, epochs: int = 20, batch_size: int = 64, num_workers: int = 2,
             step: Optional[Callable[[Any], Any]] = None, growth_limit: float = GROWTH_LIMIT,
             progress: bool = False, **loader_kwargs: Any) -> SoakReport:
    """Iterate ``dataset`` for ``epochs`` through `make_loader` with persistent workers, calling
    ``step(batch)`` on each batch (your training step, or nothing), and record what every process held.

    ``loader_kwargs`` go to `make_loader` (a sampler, a collate function, ...); workers are always
    persistent, so each row of the report follows one process from the first epoch to the last.
    Descriptors are counted after the threads started during the run have ended (at most
    `THREAD_EXIT_SECONDS`), since the loader's queues close their pipes from their own threads.
    """
    if epochs < 2:
        raise ValueError(f"epochs={epochs}: growth is measured from the end of epoch 1, so soak at least 2")
    pid_log = SharedLog("labkit-soak-pids-")
    if num_workers > 0:
        loader_kwargs.update(persistent_workers=True,
                             worker_init_fn=_RecordWorkerPid(pid_log, loader_kwargs.get("worker_init_fn")))
    gc.collect()
    fds_before, shm_before = open_fds(), shm_segments()
    threads_before = set(threading.enumerate())
    loader = make_loader(dataset, batch_size=batch_size, num_workers=num_workers, **loader_kwargs)
    records: List[EpochRecord] = []
    pids: Dict[str, int] = {}
    rounds = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        rounds = tqdm(rounds, desc="soak", unit="epoch")
    for epoch in rounds:
        seconds = _one_epoch(loader, step)
        gc.collect()
        pids = {MAIN: os.getpid(), **{f"worker {r['worker']}": r["pid"] for r in pid_log.records()}}
        records.append(EpochRecord(epoch + 1, seconds, *({role: measure(pid) for role, pid in pids.items()}
                                                         for measure in (rss_bytes, anonymous_bytes, private_bytes)),
                                   open_fds()))
    del loader  # persistent workers stop when the last reference to their loader goes
    gc.collect()
    _join_threads_started_since(threads_before)
    workers_left = [f"{role} (pid {pid})" for role, pid in pids.items() if role != MAIN and running(pid)]
    new_shm = shm_segments() - shm_before
    left = sorted(new_shm - _held_shm()) if new_shm else []
    return SoakReport(records, pids, fds_before, open_fds(), left, workers_left, growth_limit)
