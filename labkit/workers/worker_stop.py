"""Stopping a DataLoader's workers now, not when the garbage collector frees its iterator (a plain DataLoader
then waits up to 5 s for each), and leaving nothing of theirs in /dev/shm."""

from __future__ import annotations

from typing import Any

from labkit.core.torch_internals import (
    forget_iterator,
    forget_worker_pids,
    live_iterator,
    remove_dead_process_segments,
    shutdown_workers,
    worker_processes,
)


def stop_workers(iterator: Any, kill: bool = True) -> None:
    """Stop every worker of a DataLoader ``iterator``: killed at once when one is stuck or dead (a stuck one will
    not answer a polite shutdown), else asked to finish first. A worker that died while it made a batch can
    leave that batch's /dev/shm segment behind: once it is gone, its segments are removed."""
    workers = worker_processes(iterator)
    try:
        forget_worker_pids(iterator)
        if kill:
            for w in workers:
                if w.is_alive():
                    w.kill()
            for w in workers:
                w.join(timeout=5)
    finally:
        shutdown_workers(iterator)
        for w in workers:
            if w.exitcode is not None and w.exitcode != 0:
                remove_dead_process_segments(w.pid)


def close_loader(loader: Any, kill: bool = False) -> None:
    """Stop ``loader``'s workers (persistent ones included; a no-op when none run): its next epoch starts
    fresh ones."""
    iterator = live_iterator(loader)
    if iterator is not None:
        stop_workers(iterator, kill)
    forget_iterator(loader)
