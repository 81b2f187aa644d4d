"""Memory and CPU time of a process and of its workers, as the OS counts them (psutil, plus Linux extras).

Two questions need two measures:

- *How much RAM does this loader take?* `tree_memory_bytes`: the proportional set size (PSS) of
  the process and every worker, summed. A page that N processes share counts 1/N in each, so the
  pack that every worker maps, or the parent's heap that forked workers share, counts once. RSS
  summed (`tree_rss_bytes`) counts such a page once per process: an upper bound, far above the truth
  with several workers. PSS is a Linux figure; on macOS and Windows the sum is of USS (pages only
  one process holds), which leaves shared pages out: a lower bound. `tree_memory_measure` says which.
- *Is something leaking?* `read_memory(pid).unique_anonymous`: anonymous pages (heap, stacks, pages
  copied on write) that only this process holds. A leak adds them, and so does copy-on-write: a
  forked worker that touches the parent's Python objects (reference counts are writes) copies each
  page it touches. RSS misses copy-on-write (a copied page was already counted) and grows with every
  page of a mapped file read (an mmap'd pack), pages the page cache shares and the kernel reclaims
  at will. Only Linux separates them (``/proc``); elsewhere USS, which also counts pages of mapped
  files only this process has read, is the nearest figure.

A figure the OS does not give is ``None`` (and printed as "not available on <OS>", `labkit.core.machine.os_name`),
never 0.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psutil

from labkit.core.machine import os_name
from labkit.core.timing import Stopwatch

Pid = int | None  #: a process id; None: this process (every measure of a process takes one)
LINUX = sys.platform.startswith("linux")


def _process(pid: Pid) -> psutil.Process:
    return psutil.Process(os.getpid() if pid is None else int(pid))


_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, ValueError)


def rss_bytes(pid: Pid = None) -> int | None:
    """Resident set size: every page in RAM this process maps, shared or not (cheap: sample it as often
    as you like). ``None`` for a process that has ended or that this user may not read."""
    try:
        return _process(pid).memory_info().rss
    except _GONE:
        return None


def peak_rss_bytes() -> int | None:
    """The highest RSS this process has had since it started (the OS's high-water mark: ``ru_maxrss`` on
    Linux and macOS, the peak working set on Windows). It never goes down, so a peak of one piece of work is
    read in a fresh process started for it (a forked one inherits its parent's mark), after
    `reset_peak_rss` where the OS allows it. ``None`` where the OS does not keep one."""
    if LINUX:  # VmHWM, not ru_maxrss: that one also keeps the peak of the process this one was exec'd from
        return _status_bytes(None).get("VmHWM")
    try:
        import resource
    except ImportError:  # Windows
        return getattr(_process(None).memory_info(), "peak_wset", None)
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # bytes on macOS


def reset_peak_rss() -> bool:
    """Lower this process's RSS high-water mark to its RSS now (Linux: ``/proc/self/clear_refs``), so that
    `peak_rss_bytes` reads the peak of what runs next, not of the imports before it. False where the OS
    has no such reset (macOS, Windows): the mark then also holds every earlier peak."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _full_info(pid: Pid) -> Any:
    try:
        return _process(pid).memory_full_info()  # walks every mapping: ~20 ms for a process with torch loaded
    except _GONE:
        return None


def private_bytes(pid: Pid = None) -> int | None:
    """USS: pages only this process holds, what its exit would free (Linux, macOS, Windows)."""
    return getattr(_full_info(pid), "uss", None)


def pss_bytes(pid: Pid = None) -> int | None:
    """PSS: each resident page divided by the number of processes that map it (Linux only)."""
    return getattr(_full_info(pid), "pss", None)


def _status_bytes(pid: Pid) -> dict[str, int]:
    """RssAnon, RssFile, RssShmem and VmHWM (the peak RSS) from ``/proc/<pid>/status`` in bytes (Linux; psutil
    gives RSS whole)."""
    fields: dict[str, int] = {}
    if not LINUX:
        return fields
    try:
        with open(f"/proc/{os.getpid() if pid is None else pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    fields[name] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return fields


def unique_anonymous_bytes(pid: Pid = None) -> int | None:
    """Anonymous pages only this process holds: what a leak or copy-on-write grows (Linux only).

    Per mapping, the private dirty pages that are anonymous: shared memory (a batch in /dev/shm) and
    pages of files are left out, whoever maps them."""
    if not LINUX:
        return None
    try:
        maps = _process(pid).memory_maps(grouped=False)
    except _GONE:
        return None
    return sum(min(m.private_dirty, m.anonymous) for m in maps)


@dataclass(frozen=True)
class MemoryReading:
    """One process's memory at one instant, in bytes; ``None`` where this OS does not give the figure."""

    rss: int
    uss: int | None
    pss: int | None
    anonymous: int | None
    file_backed: int | None  # pages of mapped files: libraries, an mmap'd pack (Linux)
    shared_memory: int | None  # /dev/shm segments, files on a tmpfs, other shared memory (Linux)
    unique_anonymous: int | None


MEASURES = {
    "rss": "RSS",
    "file_backed": "file-backed",
    "shared_memory": "shared memory",
    "anonymous": "anonymous",
    "unique_anonymous": "unique anonymous",
    "uss": "USS",
    "pss": "PSS",
}


def read_memory(pid: Pid = None) -> MemoryReading | None:
    """Every figure this OS gives for one process (~100 ms with torch loaded: not for every step);
    ``None`` once the process has ended."""
    try:
        proc = _process(pid)
        try:
            info = proc.memory_full_info()
        except psutil.AccessDenied:  # some systems deny the page walk but not the totals
            info = proc.memory_info()
    except _GONE:
        return None
    status = _status_bytes(pid)
    return MemoryReading(
        info.rss,
        getattr(info, "uss", None),
        getattr(info, "pss", None),
        status.get("RssAnon"),
        status.get("RssFile"),
        status.get("RssShmem"),
        unique_anonymous_bytes(pid),
    )


def descendants(pid: Pid = None) -> list[int]:
    """Every process below ``pid`` (this process by default): DataLoader workers, their children..."""
    try:
        return [child.pid for child in _process(pid).children(recursive=True)]
    except _GONE:
        return []


def cpu_seconds(pid: Pid = None) -> float | None:
    """User + system CPU time a process has used so far; ``None`` once it has ended (or this user may not read it)."""
    try:
        times = _process(pid).cpu_times()
    except _GONE:
        return None
    return times.user + times.system


def tree_cpu_seconds() -> float:
    """CPU time of this process and every live descendant (workers included); a worker that ends while
    being read adds nothing."""
    return sum(s for s in map(cpu_seconds, [None, *descendants()]) if s is not None)


def tree_rss_bytes() -> int:
    """RSS of this process plus its descendants': a page they share counts once per process, so this
    is an upper bound (`tree_memory_bytes` counts it once)."""
    return sum(rss_bytes(p) or 0 for p in [None, *descendants()])


@lru_cache(maxsize=1)
def tree_memory_measure() -> str:
    """What `tree_memory_bytes` sums here: "PSS" (Linux), "USS" (macOS, Windows) or "RSS" (neither given)."""
    info = _full_info(None)
    return next((name for name in ("PSS", "USS") if getattr(info, name.lower(), None) is not None), "RSS")


def describe_tree_memory() -> str:
    """One line for a table or a JSON file: which figure the memory column is, and what it counts."""
    return {
        "PSS": "PSS of the main process and its workers, summed: a page they share counts once",
        "USS": f"USS of the main process and its workers, summed (PSS not available on {os_name()}): "
        "pages they share are left out, so it is a lower bound",
        "RSS": f"RSS of the main process and its workers, summed (PSS and USS not available on {os_name()}): "
        "a page they share counts once per process, so it is an upper bound",
    }[tree_memory_measure()]


def tree_memory_bytes() -> int:
    """RAM this process and its workers take together, shared pages counted once (`tree_memory_measure`
    says which figure: PSS where the OS gives it). ~20 ms a process with torch loaded."""
    field = tree_memory_measure().lower()
    read = rss_bytes if field == "rss" else (lambda pid: getattr(_full_info(pid), field, None))
    return sum(read(pid) or 0 for pid in [None, *descendants()])  # a worker that just ended adds nothing


class PeakMemory:
    """The peak of a tree-wide figure over a run (`tree_memory_bytes` unless ``read`` says otherwise),
    sampled at most every ``interval`` seconds: a PSS sample walks every page table of every process,
    ~20 ms each, too dear for every step of a fast loader. The first `sample` call always samples
    (the workers run by then; they need not at construction)."""

    def __init__(
        self, interval: float = 2.0, read: Callable[[], int] = tree_memory_bytes, measure: str | None = None
    ) -> None:
        self.interval, self._read = interval, read
        self.measure = measure or tree_memory_measure()
        self.peak = read()
        self._since: Stopwatch | None = None

    def sample(self, *_: object) -> None:
        """Take a sample if ``interval`` has passed (accepts and ignores a batch, to serve as ``on_batch``)."""
        if self._since is None or self._since.elapsed >= self.interval:
            self.peak = max(self.peak, self._read())
            self._since = Stopwatch()
