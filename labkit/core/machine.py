"""This machine, as the loader's processes and every measurement need to know it: what it is (`machine_info`,
printed and stored beside every measurement), its OS by name, its physical cores, RAM and /dev/shm sizes.

Kept in core because the workers' watchdog (what /dev/shm had left when a batch was lost) asks, below the
measurements. The processes running on it are `labkit.core.processes`'.

A figure this OS does not give is ``None`` (printed as "not available on <OS>", `os_name`), never 0.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from typing import Any

import psutil

from labkit.core.environment import usable_cpus

SHM_DIR = "/dev/shm"


def os_name() -> str:
    """This OS as a learner knows it ("Linux", "macOS", "Windows")."""
    return {"Darwin": "macOS"}.get(platform.system(), platform.system() or sys.platform)


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, device and library versions: printed and stored beside every measurement."""
    import torch
    import torchvision

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "cpu_count": usable_cpus(),
        "cpu": cpu,
        "device": device,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def describe_machine(info: dict[str, Any] | None = None) -> str:
    """`machine_info` in one line: ``2 CPUs (Intel Xeon ...), device cpu, torch 2.5.1, torchvision 0.20.1``."""
    info = info or machine_info()
    return (
        f"{info['cpu_count']} CPUs ({info['cpu']}), device {info['device']}, "
        f"torch {info['torch']}, torchvision {info['torchvision']}"
    )


def usable_physical_cores() -> int:
    """Physical cores this process may use: the cores behind its usable CPUs (two hyper-threads of one core count
    once), at most the usable CPUs; where the OS does not say, the usable CPUs. The article's rule of thumb for
    ``num_workers`` (one to two per core) is about these, not about logical CPUs."""
    cpus = usable_cpus()
    physical = psutil.cpu_count(logical=False)
    logical = psutil.cpu_count(logical=True)
    if not physical or not logical:
        return cpus
    return max(1, min(cpus, round(cpus * physical / logical)))


@dataclass(frozen=True)
class MemoryFacts:
    """RAM and /dev/shm in bytes; the /dev/shm figures are ``None`` where the OS has no /dev/shm."""

    ram_total: int
    ram_available: int
    shm_total: int | None
    shm_free: int | None

    def describe_shm(self) -> str:
        """What /dev/shm has free, for a message: ``12.0 MiB free of 64.0 MiB``, or ``not available on macOS``."""
        if self.shm_total is None or self.shm_free is None:
            return f"not available on {os_name()}"
        if self.shm_total == 0:  # a tmpfs mounted without a size limit reports no blocks
            return "no size limit reported"
        return f"{self.shm_free / 2**20:.1f} MiB free of {self.shm_total / 2**20:.1f} MiB"


def memory_facts() -> MemoryFacts:
    """RAM (psutil: every OS) and ``/dev/shm`` sizes in bytes; the /dev/shm figures are ``None`` where the
    OS has no /dev/shm (macOS, Windows)."""
    ram = psutil.virtual_memory()
    shm_total: int | None = None
    shm_free: int | None = None
    if os.path.isdir(SHM_DIR):
        st = os.statvfs(SHM_DIR)
        shm_total, shm_free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return MemoryFacts(ram.total, ram.available, shm_total, shm_free)
