"""The one door to PyTorch's private machinery: every name of torch's that starts with an underscore, and that
labkit needs, is used here and nowhere else (a test holds it), as torch keeps its own in ``_utils``.

What labkit needs from behind torch's public API, and why:

* a DataLoader's live iterator and its worker processes: the watchdog names a stuck or dead worker and stops
  them all; the course's clip runner stops them between runs;
* how long a DataLoader iterator waits for one batch before it raises: the watchdog polls its workers between
  short waits, so a hang is found while the workers can still be asked what they are doing;
* taking those workers out of torch's SIGCHLD handler, which would raise their death inside whatever the
  main thread runs, where the watchdog polls for it instead;
* a storage's use count: reused host buffers and batch slots must know that no tensor still holds them;
* the names torch gives a process's shared-memory segments (``torch_<pid>_...``): a worker killed between
  creating one and unlinking it leaves it in /dev/shm, where nothing else will ever remove it.

Each helper degrades to "not known" (None, an empty list) where a torch release has renamed what it reads.
"""

from __future__ import annotations

import math
import os
import signal
from typing import Any

import torch

_STORAGE_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)


_UPSAMPLE_AA = getattr(getattr(torch._C, "_nn", None), "_upsample_bilinear2d_aa", None)


def antialiased_bilinear(batch: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """``F.interpolate(batch, hw, mode="bilinear", align_corners=False, antialias=True)``: the same kernel, called
    without the Python argument checks around it (about ten Python calls an image on the decoders' hot path)."""
    if _UPSAMPLE_AA is None:  # a torch that renamed it: the public path
        from torch.nn.functional import interpolate

        return interpolate(batch, size=list(hw), mode="bilinear", align_corners=False, antialias=True)
    return _UPSAMPLE_AA(batch, list(hw), False, None)


def new_shared_tensor(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor in a fresh shared-memory segment, as default_collate makes one in a worker
    (``share_memory_()`` would allocate it first in private memory and copy)."""
    empty = torch.empty(0, dtype=dtype)
    storage = empty._typed_storage()._new_shared(math.prod(shape), device=empty.device)
    return empty.new(storage).resize_(shape)


def storage_use_count(tensor: torch.Tensor) -> int | None:
    """How many references torch holds to ``tensor``'s storage (the temporary storage object asked counts
    one); None where this PyTorch cannot tell."""
    if _STORAGE_USE_COUNT is None:
        return None
    return _STORAGE_USE_COUNT(tensor.untyped_storage()._cdata)


def live_iterator(loader: Any) -> Any:
    """The iterator a DataLoader keeps between epochs (persistent workers), or None."""
    return getattr(loader, "_iterator", None)


def forget_iterator(loader: Any) -> None:
    """Make the DataLoader start a fresh iterator (and fresh workers) on its next ``iter()``."""
    if hasattr(loader, "_iterator"):
        loader._iterator = None


def set_batch_wait(iterator: Any, seconds: float) -> None:
    """Make ``iterator`` raise "timed out" after waiting ``seconds`` for one batch (0: wait for ever), the
    DataLoader's ``timeout=`` changed on a live iterator."""
    iterator._timeout = seconds


def worker_processes(iterator: Any) -> list[Any]:
    """The worker processes of a DataLoader iterator (none for a single-process one)."""
    return list(getattr(iterator, "_workers", []))


def forget_worker_pids(iterator: Any) -> None:
    """Take ``iterator``'s workers out of torch's SIGCHLD handler, which would raise their death in whatever
    the main thread is running."""
    from torch.utils.data._utils import signal_handling

    if getattr(iterator, "_worker_pids_set", False):
        signal_handling._remove_worker_pids(id(iterator))
        iterator._worker_pids_set = False


def shutdown_workers(iterator: Any) -> None:
    """torch's own orderly shutdown of an iterator's workers, queues and pin-memory thread (a no-op for one
    without workers)."""
    if hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()


SHM_FOLDER = "/dev/shm"


def remove_dead_process_segments(pid: int, folder: str = SHM_FOLDER) -> list[str]:
    """Unlink the shared-memory segments torch named for process ``pid``, which must be dead: a worker killed
    while it made a batch leaves the one it was making. Returns the names removed."""
    prefix = f"torch_{int(pid)}_"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:  # no /dev/shm (macOS, Windows): torch names nothing there
        return []
    removed = []
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
            removed.append(name)
        except OSError:
            pass
    return removed


def exit_text(exitcode: int) -> str:
    """A process's exit code in words: ``exit code -9, killed by SIGKILL``."""
    if exitcode < 0:
        try:
            return f"exit code {exitcode}, killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"exit code {exitcode}, killed by signal {-exitcode}"
    return f"exit code {exitcode}"
