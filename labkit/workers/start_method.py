"""How a loader's workers start in a process that already runs threads of its own: not by fork.

A forked child gets a copy of the parent's memory with only the forking thread running; a lock another thread
held at that instant stays held for good (the article's 6.5, a worker hung for ever). A process that has joined
a torch.distributed process group runs the backend's threads (gloo's and nccl's), so DataLoader workers forked
there can hang, rarely and only under load. `worker_context` keeps fork where nothing else runs, and starts the
workers from a fork server otherwise: they begin from a clean, single-threaded process (on macOS and Windows,
spawn is the default already).
"""

from __future__ import annotations

import multiprocessing
from typing import Any


def holds_process_group() -> bool:
    """Whether this process has joined a torch.distributed process group (whose backend runs threads)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def worker_context(given: Any = None) -> Any:
    """``given`` (a context or a start method's name) where one is given; else ``"forkserver"`` where workers would be
    forked from a process holding a process group's threads (``"spawn"`` where there is no fork server); else None
    (the platform's default)."""
    if given is not None or multiprocessing.get_start_method() != "fork" or not holds_process_group():
        return given
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
