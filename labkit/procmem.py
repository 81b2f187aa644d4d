"""Memory of a process as the kernel counts it (Linux ``/proc``; zero where unavailable).

RSS counts shared pages too, so N forked DataLoader workers that share one dataset
would appear to use N times its size. Private memory (pages only this process holds)
is the number that shows copy-on-write growth. The tree functions add up a process and
its workers, for the ablation's CPU and memory columns.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Union

Pid = Union[int, str]


def _smaps_rollup(pid: Pid = "self") -> Dict[str, int]:
    fields: Dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return fields


def private_bytes(pid: Pid = "self") -> int:
    """Bytes of memory only this process holds (private clean + dirty pages)."""
    fields = _smaps_rollup(pid)
    return fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def rss_bytes(pid: Pid = "self") -> int:
    """Resident set size in bytes, shared pages included (``/proc/<pid>/statm``: cheap enough to
    sample every step, unlike ``smaps_rollup``, which walks every mapping: ~20 ms for a torch process)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def anonymous_bytes(pid: Pid = "self") -> int:
    """Resident anonymous memory (heap, stacks, copied-on-write pages): RSS less mapped files, such
    as an mmap'd pack, whose pages count in RSS once read but are bounded by the file's size."""
    return _smaps_rollup(pid).get("Anonymous", 0)


def _stat_fields(pid: Pid) -> List[str]:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return text[text.rfind(")") + 2 :].split()  # fields after "pid (comm)", starting with state


def running(pid: Pid) -> bool:
    """True while ``pid`` runs; one that exited but was never reaped (a zombie) counts as gone."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def descendants(pid: Optional[int] = None) -> List[int]:
    """Every process below ``pid`` (this process by default): DataLoader workers, pin threads' children..."""
    root = os.getpid() if pid is None else pid
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            fields = _stat_fields(entry)
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cpu_seconds(pid: Pid = "self") -> float:
    """User + system CPU time a process has used so far."""
    fields = _stat_fields(pid)
    if len(fields) < 13:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """CPU time of this process and every live descendant (workers included)."""
    return cpu_seconds() + sum(cpu_seconds(p) for p in descendants())


def tree_rss_bytes() -> int:
    """RSS of this process plus its descendants' (shared pages are counted in each, so it is an upper bound)."""
    return rss_bytes() + sum(rss_bytes(p) for p in descendants())


class PeakRss:
    """The peak of `tree_rss_bytes` over a run, sampled at most every ``interval`` seconds: one
    sample walks ``/proc`` (milliseconds), too dear to take on every step of a fast loader."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.peak = tree_rss_bytes()
        self._last = time.monotonic()

    def sample(self, *_: object) -> None:
        """Take a sample if ``interval`` has passed (accepts and ignores a batch, to serve as ``on_batch``)."""
        now = time.monotonic()
        if now - self._last >= self.interval:
            self.peak = max(self.peak, tree_rss_bytes())
            self._last = now
