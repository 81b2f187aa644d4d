"""This machine, as the loader's processes need to know it: RAM and /dev/shm sizes, and whether a process runs.

Kept in core because both the workers' watchdog (what /dev/shm had left when a batch was lost)
and the checkpoints (is the process holding a lock alive?) ask, below the measurements.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


def running(pid: int) -> bool:
    """True while ``pid`` runs; one that exited but was never reaped (a zombie) counts as gone."""
    try:
        return psutil.Process(int(pid)).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.AccessDenied:  # it exists, and belongs to someone else
        return True
    except (psutil.NoSuchProcess, ProcessLookupError, ValueError):
        return False


@dataclass(frozen=True)
class MemoryFacts:
    ram_total: int
    ram_available: int
    shm_total: int
    shm_free: int


def memory_facts() -> MemoryFacts:
    """RAM (psutil: every OS) and ``/dev/shm`` sizes in bytes; the /dev/shm figures are zero where the
    OS has no /dev/shm (macOS, Windows)."""
    ram = psutil.virtual_memory()
    shm_total = shm_free = 0
    if os.path.isdir("/dev/shm"):
        st = os.statvfs("/dev/shm")
        shm_total, shm_free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return MemoryFacts(ram.total, ram.available, shm_total, shm_free)
