"""What limits page-locked (pinned) host memory on this machine, for notebook 04's look at seed 3.2.

The article calls pinned memory a scarce resource: locked pages cannot be swapped out, so every pinned MiB is RAM
taken for as long as it is held. Two facts about the process matter and take OS-specific code to read:

* `lock_limit` — the locked-memory limit (``ulimit -l``, ``RLIMIT_MEMLOCK``) on Linux and macOS, and on Linux
  whether the process holds ``CAP_IPC_LOCK``, which exempts it from that limit (root usually does). The limit
  caps what ``mlock`` may lock; whether CUDA's pinned allocations count against it is a separate question, which
  the notebook answers only where it can measure it.
* `pinning_here` — what ``torch.empty(..., pin_memory=True)`` does in this process: on a machine without CUDA
  it raises, and the learner should see its message rather than be told about it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CAP_IPC_LOCK = 14  # linux/capability.h


def _mib(n: int | None) -> str:
    return "unlimited" if n is None else f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def cap_ipc_lock(status_path: str = "/proc/self/status") -> bool | None:
    """Whether this process's effective capabilities include ``CAP_IPC_LOCK`` (Linux's ``CapEff`` line);
    ``None`` where that cannot be read (not Linux)."""
    try:
        with open(status_path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split(":", 1)[1].strip(), 16) >> CAP_IPC_LOCK & 1)
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class LockLimit:
    """The locked-memory limit in bytes (``None``: unlimited), and whether the process is exempt from it
    (``CAP_IPC_LOCK``; ``None``: unknown on this OS)."""

    soft: int | None
    hard: int | None
    exempt: bool | None

    def describe(self) -> str:
        text = f"locked-memory limit (ulimit -l): {_mib(self.soft)}"
        if self.hard != self.soft:
            text += f" (hard limit {_mib(self.hard)})"
        if self.exempt:
            text += "; this process has CAP_IPC_LOCK, so mlock may lock more than that"
        elif self.exempt is False:
            text += "; this process has no CAP_IPC_LOCK, so mlock stops at that"
        return text


def lock_limit() -> LockLimit | None:
    """``RLIMIT_MEMLOCK`` of this process (Linux, macOS); ``None`` where the OS has none (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    limit = getattr(resource, "RLIMIT_MEMLOCK", None)
    if limit is None:
        return None
    soft, hard = resource.getrlimit(limit)

    def _bytes(value: int) -> int | None:
        return None if value == resource.RLIM_INFINITY or value < 0 else int(value)

    return LockLimit(_bytes(soft), _bytes(hard), cap_ipc_lock() if os.path.exists("/proc/self/status") else None)


def pinning_here() -> str:
    """What ``torch.empty(1, pin_memory=True)`` does in this process, in a line: ``"works"``, or the error it
    raises (its type and the first line of its message)."""
    import torch

    try:
        torch.empty(1, dtype=torch.uint8, pin_memory=True)
    except Exception as e:  # torch raises RuntimeError without a driver; another build may raise otherwise
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"raises {type(e).__name__}: {message}" if message else f"raises {type(e).__name__}"
    return "works"
