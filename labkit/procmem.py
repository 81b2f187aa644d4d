"""Memory of a process as the kernel counts it (Linux ``/proc``; zero where unavailable).

RSS counts shared pages too, so N forked DataLoader workers that share one dataset
would appear to use N times its size. Private memory (pages only this process holds)
is the number that shows copy-on-write growth. The tree functions add up a process and
its workers, for the ablation's CPU and memory columns.
"""

from __future__ import annotations

import os
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
    """Resident set size in bytes, shared pages included."""
    return _smaps_rollup(pid).get("Rss", 0)


def _stat_fields(pid: Pid) -> List[str]:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return text[text.rfind(")") + 2 :].split()  # fields after "pid (comm)", starting with state


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
