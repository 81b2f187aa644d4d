"""A watchdog for DataLoader workers: when one hangs or dies, say who was doing what, then fail cleanly.

A stuck worker (a deadlock after fork, a read from a dead network mount, a decode that
never returns) makes a plain DataLoader wait forever, or with ``timeout=`` raise a bare
"DataLoader timed out". `WatchedLoader` instead reports, for every worker: whether it is
alive, which samples it was fetching and for how long, and its Python stack (dumped by
``faulthandler`` inside the worker), then shuts the workers down and raises
`LoaderHangError`. A worker killed by a signal becomes a `LoaderWorkerError` naming it, the
signal and its samples in flight; an exception raised in a worker keeps its type and gains a
note saying which samples were in flight. After any of these the workers are stopped at once
(a plain DataLoader leaves them running until the garbage collector frees its iterator, and
then waits 5 s for each), and the next epoch starts fresh ones, persistent or not. It needs
``num_workers > 0``: a hang in the main process is your own stack, which
``faulthandler.dump_traceback_later`` prints.

Three rules make the report true whatever the scheduler does:

- Deaths are found by polling the workers, not by torch's SIGCHLD handler, which raises
  wherever the main thread happens to be (in your loop body, or inside this report).
- A broken connection while receiving a batch (the fd sharer of a killed worker resets it)
  is a death until proven otherwise: a killed process shows its exit code only once the
  kernel has reaped it, so the watchdog waits a bounded moment for one before believing
  the workers are alive.
- Start-up is not a hang. Under spawn or forkserver (macOS, Windows; Linux from Python 3.14)
  a worker imports torch afresh and takes seconds to start; the hang clock starts when every
  worker has run its ``worker_init_fn``, and a worker is asked for its stack only after it
  has installed the handler that answers (the signal's default action would kill it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader, Dataset

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.pass_through import PassThrough
from labkit.core.shared_log import SharedLog
from labkit.core.timing import Deadline, timestamp
from labkit.core.torch_internals import (
    forget_iterator,
    forget_worker_pids,
    live_iterator,
    set_batch_wait,
    worker_processes,
)
from labkit.datasets.fetch_log import FetchLoggedDataset
from labkit.workers.worker_init import WorkerInitChain
from labkit.workers.worker_marks import StackDumpInit, StartedMark, read_mark
from labkit.workers.worker_report import DEATH_FIX, WorkerReport, dead_workers
from labkit.workers.worker_stop import stop_workers

POLL_S = 0.25  # how often the main process looks at its workers while it waits for a batch
DEATH_WAIT_S = 2.0  # how long a broken connection waits for a worker to show its exit code
STARTUP_LIMIT_S = 120.0  # a worker that has not started after this long (beyond the timeout) is stuck starting

# Errors that mean "the other end of a pipe or socket went away" while a batch is received: a
# ConnectionError (reset, refused, broken pipe) is an OSError, as is what the fd sharer raises.
_CONNECTION_ERRORS = (EOFError, OSError)


class LoaderHangError(LabkitError, RuntimeError):
    """No batch arrived within the watchdog's timeout; the message says what each worker was doing."""


class LoaderWorkerError(LabkitError, RuntimeError):
    """A worker process died (killed by a signal, out of memory, a crash in C code); the message says
    which, and which samples it and the others were fetching."""


def wait_for_a_death(iterator: Any, wait_s: float | None = None) -> list[Any]:
    """The workers of ``iterator`` that died, waiting up to ``wait_s`` (`DEATH_WAIT_S`) for one to show its
    exit code (`exitcode` reaps the process: a process killed a moment ago has none until then)."""
    deadline = Deadline(DEATH_WAIT_S if wait_s is None else wait_s)
    while True:
        dead = dead_workers(iterator, even_clean=True)
        if dead or deadline.expired:
            return dead
        time.sleep(0.02)


def is_receive_error(error: BaseException) -> bool:
    """Whether ``error`` broke the main process's side of a pipe or socket, as a worker dying mid-handover
    does, rather than being raised in a worker (torch re-raises those with "in DataLoader worker process")."""
    return isinstance(error, _CONNECTION_ERRORS) and "in DataLoader worker process" not in str(error)


def _died_message(error: BaseException) -> bool:
    message = str(error)
    return isinstance(error, RuntimeError) and ("killed by signal" in message or "exited unexpectedly" in message)


def _timed_out(error: BaseException) -> bool:
    return isinstance(error, RuntimeError) and "timed out" in str(error)


class WatchedLoader(PassThrough):
    """Iterates a DataLoader built by `watched_loader`; turns a silent hang into a `LoaderHangError`.

    ``last_startup_s`` is how long the workers of the last epoch that started them took to start.
    """

    wraps = "loader"

    def __init__(self, loader: DataLoader, timeout: float, dump_dir: str, log: SharedLog) -> None:
        self.loader, self.timeout, self.dump_dir, self.log = loader, timeout, dump_dir, log
        self.last_startup_s: float | None = None
        dataset = loader.dataset
        self.report = WorkerReport(
            dump_dir, log, dataset.dataset if isinstance(dataset, FetchLoggedDataset) else dataset
        )

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        began = timestamp()
        iterator = self._begin_epoch()
        waiting_since = timestamp()
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                failure = self._death_after_epoch(iterator)
            except Exception as e:
                if _timed_out(e) and self._still_waiting(iterator, began, waiting_since):
                    continue
                failure = self._failure(iterator, e)
            else:
                if self.last_startup_s is None or waiting_since < began + self.last_startup_s:
                    self._note_startup(iterator, began)
                waiting_since = timestamp()
                yield batch
                continue
            # Raised out here, with no torch frame in its traceback: those frames would keep the
            # stopped iterator, its pipes and semaphores alive for as long as the error is kept.
            iterator = None
            if failure is None:
                return
            raise failure

    def _begin_epoch(self) -> Any:
        """``iter(self.loader)``, its workers polled from then on. Persistent workers resuming a new epoch
        are waited for without polling (torch's own check finds a dead one within seconds), so a busy
        machine's slow answer is not mistaken for a hang; a death found then is reported as any other."""
        previous = live_iterator(self.loader)
        if previous is not None:
            set_batch_wait(previous, 0)
        try:
            iterator = iter(self.loader)
        except Exception as e:
            if previous is None:
                raise
            failure = self._failure(previous, e)
            previous = None
            raise failure from None
        forget_worker_pids(iterator)
        set_batch_wait(iterator, min(self.timeout, POLL_S))
        return iterator

    def _failure(self, iterator: Any, e: Exception) -> BaseException:
        """The error to raise for ``e``, caught from ``next(iterator)``; the workers are stopped."""
        if _timed_out(e):
            report = self.diagnose(iterator, f"no batch arrived for {self.timeout:g} s", self.report.hang_fix(iterator))
            self._stop(iterator)
            return LoaderHangError(report)
        dead = (
            wait_for_a_death(iterator)
            if (_died_message(e) or is_receive_error(e))
            else dead_workers(iterator, even_clean=True)
        )
        if dead:
            what = str(e).splitlines()[0] if _died_message(e) else f"{type(e).__name__} while receiving a batch: {e}"
            report = self.diagnose(iterator, f"a worker died ({what})", DEATH_FIX, stacks=False)
            self._stop(iterator)
            return LoaderWorkerError(report)
        if is_receive_error(e):
            note = (
                f"raised in the main process while receiving a batch; every worker was still alive "
                f"{DEATH_WAIT_S:g} s later, so no worker's death caused it"
            )
        else:
            # An exception raised inside a worker keeps its type; a note says what was being fetched
            # (shown under the traceback from Python 3.11; kept in __notes__ before that).
            note = self.report.in_flight_summary()
        e.__notes__ = [*getattr(e, "__notes__", []), note]
        self._stop(iterator, kill=False)  # the workers are healthy: one raised, and said so
        return e.with_traceback(None)

    def _still_waiting(self, iterator: Any, began: float, waiting_since: float) -> bool:
        """After a poll found no batch: whether to keep waiting. The hang clock starts when the last batch
        arrived or when the last worker finished starting, whichever is later."""
        started = self._note_startup(iterator, began)
        now = timestamp()
        if started is None:
            return now - began < self.timeout + STARTUP_LIMIT_S
        return now - max(waiting_since, started) < self.timeout

    def _note_startup(self, iterator: Any, began: float) -> float | None:
        """When the last of ``iterator``'s workers finished starting (None while one has not); sets
        `last_startup_s` when they were started by this epoch."""
        workers = worker_processes(iterator)
        started = [read_mark(self.dump_dir, k, "started", w.pid) for k, w in enumerate(workers)]
        if not workers or any(t is None for t in started):
            return None
        last = max(started)  # type: ignore[type-var]
        if min(started) >= began:  # type: ignore[type-var]
            self.last_startup_s = last - began
        return last

    def _death_after_epoch(self, iterator: Any) -> LoaderWorkerError | None:
        """A worker killed after its last batch loses nothing, but its death (the OOM killer?) is still news."""
        if not dead_workers(iterator):
            return None
        report = self.diagnose(iterator, "every batch of the epoch arrived, but a worker died", DEATH_FIX, stacks=False)
        self._stop(iterator)
        return LoaderWorkerError(report)

    def _stop(self, iterator: Any, kill: bool = True) -> None:
        """Stop ``iterator``'s workers; a persistent loader then starts new ones for its next epoch."""
        stop_workers(iterator, kill)
        if live_iterator(self.loader) is iterator:
            forget_iterator(self.loader)

    def diagnose(self, iterator: Any, headline: str, fix: str, stacks: bool = True) -> str:
        """`WorkerReport.describe` of ``iterator``'s workers, with how long they took to start."""
        return self.report.describe(iterator, headline, fix, stacks, self.last_startup_s)

    def __del__(self) -> None:
        shutil.rmtree(self.dump_dir, ignore_errors=True)


def watched_loader(dataset: Dataset, timeout: float, **loader_kwargs: Any) -> WatchedLoader:
    """``DataLoader(dataset, **loader_kwargs)`` whose hang after ``timeout`` seconds is explained.

    ``timeout`` counts from the last batch, or from when the last worker finished starting
    (its ``worker_init_fn`` returned), whichever is later.
    """
    if loader_kwargs.get("num_workers", 0) < 1:
        raise LabkitValueError("the hang watchdog watches worker processes: use num_workers >= 1")
    if timeout <= 0:
        raise LabkitValueError(f"hang timeout must be > 0 seconds, got {timeout}")
    dump_dir = tempfile.mkdtemp(prefix=f"labkit-stacks-{os.getpid()}-")
    log = SharedLog("labkit-inflight-")
    init = WorkerInitChain(StackDumpInit(dump_dir), loader_kwargs.pop("worker_init_fn", None), StartedMark(dump_dir))
    loader = DataLoader(
        FetchLoggedDataset(dataset, log), timeout=min(timeout, POLL_S), worker_init_fn=init, **loader_kwargs
    )
    return WatchedLoader(loader, timeout, dump_dir, log)
