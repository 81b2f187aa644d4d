"""Memory of a process as the kernel counts it (Linux ``/proc``; zero where unavailable).

RSS counts shared pages too, so N forked DataLoader workers that share one dataset
would appear to use N times its size. Private memory (pages only this process holds)
is the number that shows copy-on-write growth.
"""

from __future__ import annotations

from typing import Dict, Union

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
