"""The processes of this machine: whether one runs, how to kill one with everything it started, how a helper
process leaves Ctrl-C to its parent, and what each has mapped.

Kept in core because the workers' watchdog, the checkpoints (is the process holding a lock alive?) and the
leak checks ask, below the measurements.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

import psutil


def running(pid: int) -> bool:
    """True while ``pid`` runs; one that exited but was never reaped (a zombie) counts as gone."""
    try:
        return psutil.Process(int(pid)).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.AccessDenied:  # it exists, and belongs to someone else
        return True
    except (psutil.NoSuchProcess, ProcessLookupError, ValueError):
        return False


def kill_process_tree(pid: int) -> list[int]:
    """Kill ``pid`` and every process below it at once, as a lost node takes a job and its DataLoader workers
    (SIGKILL on Linux and macOS, TerminateProcess on Windows: one way everywhere, no process group needed).
    Returns the pids that were killed; one that had already gone is left out. ``pid`` itself is left for its
    parent to reap (``Popen.wait`` then reads its exit status), its descendants are waited for here."""
    try:
        root = psutil.Process(int(pid))
        below = root.children(recursive=True)
        tree = [*below, root]
    except (psutil.NoSuchProcess, ProcessLookupError, ValueError):
        return []
    killed = []
    for process in tree:
        try:
            process.kill()
            killed.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(below, timeout=10)
    return killed


def ignore_interrupts() -> None:
    """Let this helper process (a pool worker) ignore Ctrl-C: the terminal sends SIGINT to every process of the
    command, and the parent, which stops its helpers and removes what they wrote, is the one to answer it; a
    helper that raised too would print a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C back while helper processes are forked, then raise it: CPython runs its fork hooks (logging's
    lock, for one) in Python, and a KeyboardInterrupt raised inside one is printed and dropped, so a Ctrl-C that
    lands while a pool starts would be lost. Meanwhile a Ctrl-C is only noted; on the way out it is raised as
    KeyboardInterrupt. Outside the main thread (where no signal handler can be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if noted:
        raise KeyboardInterrupt


def process_maps() -> Iterator[tuple[int, list[str]]]:
    """(pid, lines of /proc/<pid>/maps) for every process this user may read (Linux; nothing elsewhere):
    what each process has mapped, files and /dev/shm segments alike. A process that ends meanwhile is skipped."""
    if not os.path.isdir("/proc"):
        return
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/maps", encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError:  # ended meanwhile, or not ours to read
            continue
        yield int(name), lines
