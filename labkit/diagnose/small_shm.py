"""A private, small /dev/shm: reproduce a container's shared-memory limit on any Linux machine, without root.

DataLoader workers hand batches to the main process through /dev/shm, and containers often
get a small one (Docker's default is 64 MB), so a loader that runs on a workstation can fail
in a container. `private_shm` moves the calling process into its own user and mount namespace
(which Linux lets an unprivileged user create where user namespaces are enabled) and mounts a
fresh tmpfs of the size asked on /dev/shm there. The process and everything it starts later,
DataLoader workers included, see only the small one; the rest of the machine keeps its own.

Call it first thing in a fresh process, before importing torch (which starts threads): the
kernel refuses to move a process that runs more than one thread into a new user namespace.
Later calls in the same process only mount another fresh tmpfs over the last one, so one
process can try several sizes.

``python -m labkit.diagnose.small_shm --shm-mib 16 --plan 2,4,64 --plan 2,1,16`` is the lab (article §6.1):
it gives itself a /dev/shm of 16 MiB (a container started without ``--shm-size``), then runs one
epoch of each plan (num_workers, prefetch_factor, batch of 3x256x256 uint8 images), each in a fresh
tmpfs, and prints one JSON line per plan: the doctor's level for the plan inside this /dev/shm, how
the epoch ended (``"completed"`` or the error raised), the batches that arrived, the most of
/dev/shm seen in use and what was left in it. Where the OS does not allow it, the only line printed
is ``{"unavailable": "<why>"}``. Torch is imported only once the namespace is entered.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.timing import Deadline

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_SHM = b"/dev/shm"

_entered = False  # True once this process is in its own namespaces


class PrivateShmUnavailable(LabkitError, OSError):
    """This OS or its settings do not let an unprivileged process mount its own /dev/shm."""


def _libc_call(name: str, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise PrivateShmUnavailable(errno, f"{name}() failed: {os.strerror(errno)}")


def _enter_namespaces() -> None:
    uid, gid = os.getuid(), os.getgid()
    try:
        _libc_call("unshare", _CLONE_NEWUSER | _CLONE_NEWNS)
    except PrivateShmUnavailable as e:
        raise PrivateShmUnavailable(
            e.errno,
            f"{e.strerror}; unprivileged user namespaces are disabled here "
            "(sysctl kernel.unprivileged_userns_clone or user.max_user_namespaces), "
            "or this process already runs several threads",
        ) from None
    # Map our own user and group to root inside the namespace, which may then mount.
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
            f.write(text)
    # Keep every mount made from now on inside this namespace.
    _libc_call("mount", b"none", b"/", None, _MS_REC | _MS_PRIVATE, None)


def private_shm(size_bytes: int) -> None:
    """Give this process (and its future children) an empty /dev/shm of ``size_bytes``.

    Raises `PrivateShmUnavailable` with the reason where the OS does not allow it
    (not Linux, user namespaces disabled, a seccomp profile that forbids ``unshare``).
    """
    global _entered
    if size_bytes < 4096:
        raise LabkitValueError(f"size_bytes={size_bytes}: a tmpfs needs at least one 4096-byte page")
    if not sys.platform.startswith("linux"):
        raise PrivateShmUnavailable(0, f"a private /dev/shm needs Linux namespaces; this is {sys.platform}")
    if not _entered:
        _enter_namespaces()
        _entered = True
    _libc_call("mount", b"tmpfs", _SHM, b"tmpfs", 0, f"size={size_bytes}".encode())


MIB = 2**20
IMAGE = (3, 256, 256)
WHOLE_BATCH_HANG_S = 2.0  # a dropped whole batch is reported by the watchdog after this long


class FilledImages:
    """``n`` uint8 images of `IMAGE`, each filled with its index: batches whose size is exactly known.

    With ``batch`` > 0 each index is a whole batch of that many images, as a dataset that batches
    inside the worker returns it (it enters /dev/shm on its way out, not inside collate).
    """

    def __init__(self, n: int, batch: int = 0) -> None:
        self.n, self.batch = n, batch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Any:
        import torch

        shape = (self.batch, *IMAGE) if self.batch else IMAGE
        return torch.full(shape, index % 256, dtype=torch.uint8)


def _shm_used() -> int | None:
    """Bytes in use in /dev/shm; ``None`` where there is none (`private_shm` mounts one first, so not here)."""
    from labkit.core.machine import memory_facts

    facts = memory_facts()
    return None if facts.shm_total is None or facts.shm_free is None else facts.shm_total - facts.shm_free


def _outcome(error: BaseException) -> str:
    """The error's first line and its last (where a worker's error names its cause), without the traceback."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"
    return f"{type(error).__name__}: {text}"


def run_plan(
    shm_bytes: int,
    num_workers: int,
    prefetch_factor: int,
    batch_size: int,
    batches: int = 8,
    whole_batches: bool = False,
) -> dict[str, Any]:
    """One epoch of ``batches`` batches in a fresh /dev/shm of ``shm_bytes``; what happened.

    ``whole_batches`` makes each worker return a whole batch (``batch_size=None`` to the loader),
    run under the watchdog: torch's feeder thread drops a batch it cannot move into /dev/shm, and
    a plain loader would then wait forever.
    """
    from torch.utils.data import DataLoader

    from labkit.core.machine import memory_facts
    from labkit.diagnose.doctor import LoaderPlan, check_shared_memory
    from labkit.workers.watchdog import watched_loader

    private_shm(shm_bytes)
    plan = LoaderPlan(num_workers=num_workers, prefetch_factor=prefetch_factor, batch_size=batch_size, image=IMAGE)
    level = check_shared_memory(plan, memory_facts()).level  # the doctor, inside this /dev/shm, before the loader
    result: dict[str, Any] = {
        "plan": [num_workers, prefetch_factor, batch_size],
        "shm_mib": shm_bytes / MIB,
        "batch_mib": plan.batch_bytes / MIB,
        "whole_batches": whole_batches,
        "level": level,
        "outcome": "completed",
        "error": None,
        "batches": 0,
        "peak_used_mib": 0.0,
    }
    if whole_batches:
        loader = watched_loader(
            FilledImages(batches, batch_size),
            timeout=WHOLE_BATCH_HANG_S,
            batch_size=None,
            num_workers=num_workers,
            prefetch_factor=prefetch_factor,
        )
    else:  # default_collate stacks each batch straight into /dev/shm inside the worker
        loader = DataLoader(
            FilledImages(batches * batch_size),
            batch_size=batch_size,
            num_workers=num_workers,
            prefetch_factor=prefetch_factor,
            timeout=20,
        )
    try:
        for images in loader:
            time.sleep(0.05)  # a training step, slow enough for the workers to fill every prefetch slot
            used = _shm_used()
            if used is not None:
                result["peak_used_mib"] = max(result["peak_used_mib"], used / MIB)
            result["batches"] += 1
            del images
    except Exception as e:  # what was raised is the result
        result["outcome"], result["error"] = _outcome(e), f"{type(e).__name__}: {e}"
        traceback.clear_frames(e.__traceback__)  # frees the failed iterator, which stops its workers now
    del loader
    gc.collect()
    # A worker stopped a moment ago may still be exiting, its last pages not yet freed: what is left is
    # what is still there once every child has ended (waited for, up to 5 s).
    deadline = Deadline(5.0)
    while (multiprocessing.active_children() or _shm_used()) and not deadline.expired:
        time.sleep(0.05)
    left = _shm_used()
    result["left_used_mib"] = None if left is None else left / MIB
    return result


def _plan(text: str) -> tuple[int, int, int]:
    try:
        num_workers, prefetch_factor, batch_size = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a plan is NUM_WORKERS,PREFETCH_FACTOR,BATCH_SIZE, e.g. 2,4,64"
        ) from None
    return num_workers, prefetch_factor, batch_size


def main(argv: Sequence[str] = ()) -> int:
    """``python -m labkit.diagnose.small_shm``: each plan's result as one JSON line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description="Run DataLoader plans in a private, small /dev/shm.")
    parser.add_argument("--shm-mib", type=float, default=16)
    parser.add_argument(
        "--plan",
        type=_plan,
        action="append",
        required=True,
        help="NUM_WORKERS,PREFETCH_FACTOR,BATCH_SIZE (repeat for several)",
    )
    parser.add_argument(
        "--sharing-strategy",
        choices=("file_descriptor", "file_system"),
        default=None,
        help="torch.multiprocessing's sharing strategy (default: torch's own)",
    )
    parser.add_argument(
        "--whole-batches",
        action="store_true",
        help="each worker returns a whole batch (batch_size=None), run under the watchdog",
    )
    args = parser.parse_args(list(argv) or None)
    size = int(args.shm_mib * MIB)
    try:
        private_shm(size)  # first, while this process has one thread
    except PrivateShmUnavailable as e:
        print(json.dumps({"unavailable": str(e)}), flush=True)
        return 0
    if args.sharing_strategy:
        import torch.multiprocessing

        torch.multiprocessing.set_sharing_strategy(args.sharing_strategy)
    for num_workers, prefetch_factor, batch_size in args.plan:
        print(
            json.dumps(run_plan(size, num_workers, prefetch_factor, batch_size, whole_batches=args.whole_batches)),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
