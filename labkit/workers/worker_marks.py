"""What the watchdog's workers leave for the main process to read: marks (a worker started, it answers a request
for its stack), the stack each one dumps when asked, and the fetch log's last record of each.

A worker cannot be asked what it is doing once it hangs; what it wrote before, it can be read. Each mark names
the process that wrote it, so a mark left by an earlier process of the same worker slot is not believed.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from typing import Any

from labkit.core.shared_log import SharedLog
from labkit.core.timing import timestamp

DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)  # asks a worker for its stack (not on Windows)
_kept_open: list[Any] = []  # in each worker: the file faulthandler writes to must stay open


def _mark_path(dump_dir: str, worker_id: int, mark: str) -> str:
    return os.path.join(dump_dir, f"worker-{worker_id}.{mark}")


def _stack_path(dump_dir: str, worker_id: int) -> str:
    return os.path.join(dump_dir, f"worker-{worker_id}.txt")


def write_mark(dump_dir: str, worker_id: int, mark: str) -> None:
    """Say ``mark`` for this worker process: its pid and its time stamp (comparable across processes)."""
    path = _mark_path(dump_dir, worker_id, mark)
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {timestamp()!r}")
    os.replace(path + ".tmp", path)  # whole or absent: the main process never reads half a mark


def read_mark(dump_dir: str, worker_id: int, mark: str, pid: int | None) -> float | None:
    """When the worker process ``pid`` said ``mark``; None if it has not (a mark of an earlier process of the
    same worker slot does not count)."""
    try:
        with open(_mark_path(dump_dir, worker_id, mark)) as f:
            marked_pid, when = f.read().split()
    except (OSError, ValueError):
        return None
    return float(when) if int(marked_pid) == pid else None


def answers(dump_dir: str, worker_id: int, worker: Any) -> bool:
    """Whether ``worker`` is alive and has installed the handler that dumps its stack (before then the signal's
    default action would kill it)."""
    return (
        DUMP_SIGNAL is not None
        and worker.is_alive()
        and read_mark(dump_dir, worker_id, "answers", worker.pid) is not None
    )


class StackDumpInit:
    """``worker_init_fn`` that lets the main process ask a worker for its stack, and says so with an
    ``answers`` mark once the stack-dump handler is installed."""

    def __init__(self, dump_dir: str) -> None:
        self.dump_dir = dump_dir

    def __call__(self, worker_id: int) -> None:
        if DUMP_SIGNAL is not None and hasattr(faulthandler, "register"):
            f = open(_stack_path(self.dump_dir, worker_id), "w")
            _kept_open.append(f)
            faulthandler.register(DUMP_SIGNAL, file=f, all_threads=True)
            write_mark(self.dump_dir, worker_id, "answers")


class StartedMark:
    """``worker_init_fn`` step that leaves the ``started`` mark: it runs after the caller's own."""

    def __init__(self, dump_dir: str) -> None:
        self.dump_dir = dump_dir

    def __call__(self, worker_id: int) -> None:
        write_mark(self.dump_dir, worker_id, "started")


def worker_stack(dump_dir: str, worker_id: int) -> list[str]:
    """The last stack a worker dumped: the ``File ...`` lines of the thread running its worker loop, most
    recent call first, at most eight."""
    path = _stack_path(dump_dir, worker_id)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line.rstrip() for line in f if line.strip()]
    blocks: list[list[str]] = []
    for line in lines:
        if line.startswith(("Thread ", "Current thread ")) or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    loop = next((b for b in blocks if any("_worker_loop" in line for line in b)), blocks[0] if blocks else [])
    return [line for line in loop if line.lstrip().startswith("File")][:8]


def last_fetches(log: SharedLog) -> dict[int, dict[str, Any]]:
    """For each worker, its last fetch record: a "start" not yet ended is in flight."""
    last: dict[int, dict[str, Any]] = {}
    for record in log.records():
        last[record["worker"]] = record
    return last


def failed_fetches(log: SharedLog) -> list[dict[str, Any]]:
    """Fetches that raised, oldest first."""
    return [r for r in log.records() if r["event"] == "error"]
