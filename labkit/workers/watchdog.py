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

import faulthandler
import os
import shutil
import signal
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional

from torch.utils.data import DataLoader, Dataset

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.machine import memory_facts
from labkit.core.shared_log import SharedLog
from labkit.core.torch_internals import (exit_text, forget_iterator, forget_worker_pids, live_iterator,
                                        remove_dead_process_segments, shutdown_workers, worker_processes)
from labkit.core.wording import first
from labkit.datasets.fetch_log import FetchLoggedDataset
from labkit.workers.worker_init import WorkerInitChain

_DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)
_kept_open: List[Any] = []  # in each worker: the file faulthandler writes to must stay open

POLL_S = 0.25  # how often the main process looks at its workers while it waits for a batch
DEATH_WAIT_S = 2.0  # how long a broken connection waits for a worker to show its exit code
STARTUP_LIMIT_S = 120.0  # a worker that has not started after this long (beyond the timeout) is stuck starting

_HANG_FIX = ("Fix: find the call in the stacks above; set a timeout on I/O there, and check `labkit doctor` "
             "for fork-after-threads and thread oversubscription")
_DEATH_FIX = ("Fix: exit code -9 (SIGKILL) is usually the out-of-memory killer, -7 (SIGBUS) a full /dev/shm: "
              "lower num_workers, prefetch_factor or the batch size; `labkit doctor` estimates both")
_LOST_BATCH = ("No worker is inside the dataset, so the wait is in collate_fn or a finished batch was lost: a "
               "worker that cannot move a batch it returned into a full /dev/shm prints 'unable to allocate "
               "shared memory ... No space left on device' on its stderr and drops the batch. /dev/shm: {shm}. "
               "If it is nearly full: lower num_workers, prefetch_factor or the batch size (`labkit doctor`)")
_STARTUP_FIX = ("Fix: a worker that never finishes starting is stuck unpickling the dataset or in worker_init_fn "
                "(the stacks above show which, where a worker got far enough to answer); under spawn or "
                "forkserver each worker also imports torch and your dataset's module afresh")

# Errors that mean "the other end of a pipe or socket went away" while a batch is received: a
# ConnectionError (reset, refused, broken pipe) is an OSError, as is what the fd sharer raises.
_CONNECTION_ERRORS = (EOFError, OSError)


class LoaderHangError(LabkitError, RuntimeError):
    """No batch arrived within the watchdog's timeout; the message says what each worker was doing."""


class LoaderWorkerError(LabkitError, RuntimeError):
    """A worker process died (killed by a signal, out of memory, a crash in C code); the message says
    which, and which samples it and the others were fetching."""


def _mark_path(dump_dir: str, worker_id: int, mark: str) -> str:
    return os.path.join(dump_dir, f"worker-{worker_id}.{mark}")


def _write_mark(dump_dir: str, worker_id: int, mark: str) -> None:
    """Say ``mark`` for this worker process: its pid and the wall-clock time (comparable across processes)."""
    path = _mark_path(dump_dir, worker_id, mark)
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {time.time()!r}")
    os.replace(path + ".tmp", path)  # whole or absent: the main process never reads half a mark


def _read_mark(dump_dir: str, worker_id: int, mark: str, pid: Optional[int]) -> Optional[float]:
    """When the worker process ``pid`` said ``mark``; None if it has not (a mark of an earlier process of the
    same worker slot does not count)."""
    try:
        with open(_mark_path(dump_dir, worker_id, mark)) as f:
            marked_pid, when = f.read().split()
    except (OSError, ValueError):
        return None
    return float(when) if int(marked_pid) == pid else None


class StackDumpInit:
    """``worker_init_fn`` that lets the main process ask a worker for its stack, and says so with an
    ``answers`` mark once the stack-dump handler is installed."""

    def __init__(self, dump_dir: str) -> None:
        self.dump_dir = dump_dir

    def __call__(self, worker_id: int) -> None:
        if _DUMP_SIGNAL is not None and hasattr(faulthandler, "register"):
            f = open(os.path.join(self.dump_dir, f"worker-{worker_id}.txt"), "w")
            _kept_open.append(f)
            faulthandler.register(_DUMP_SIGNAL, file=f, all_threads=True)
            _write_mark(self.dump_dir, worker_id, "answers")


class StartedMark:
    """``worker_init_fn`` step that leaves the ``started`` mark: it runs after the caller's own."""

    def __init__(self, dump_dir: str) -> None:
        self.dump_dir = dump_dir

    def __call__(self, worker_id: int) -> None:
        _write_mark(self.dump_dir, worker_id, "started")


def _fetches(log: SharedLog) -> Dict[int, Dict[str, Any]]:
    """For each worker, its last fetch record: a "start" not yet ended is in flight."""
    last: Dict[int, Dict[str, Any]] = {}
    for record in log.records():
        last[record["worker"]] = record
    return last


def _failed(log: SharedLog) -> List[Dict[str, Any]]:
    """Fetches that raised, oldest first."""
    return [r for r in log.records() if r["event"] == "error"]


def _stop_workers(iterator: Any, kill: bool = True) -> None:
    """Stop every worker: killed at once when one is stuck or dead (a stuck one will not answer a polite
    shutdown), else asked to finish first. A worker that died while it made a batch can leave that batch's
    /dev/shm segment behind: once it is gone, its segments are removed."""
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


def _dead_workers(iterator: Any, even_clean: bool = False) -> List[Any]:
    """Workers of ``iterator`` that ended with an error or a signal (exit code not 0); with ``even_clean``,
    also those that ended cleanly (before the loader shut them down, any end is unexpected)."""
    return [w for w in worker_processes(iterator) if w.exitcode is not None and (even_clean or w.exitcode != 0)]


def wait_for_a_death(iterator: Any, wait_s: Optional[float] = None) -> List[Any]:
    """The workers of ``iterator`` that died, waiting up to ``wait_s`` (`DEATH_WAIT_S`) for one to show its
    exit code (`exitcode` reaps the process: a process killed a moment ago has none until then)."""
    deadline = time.monotonic() + (DEATH_WAIT_S if wait_s is None else wait_s)
    while True:
        dead = _dead_workers(iterator, even_clean=True)
        if dead or time.monotonic() >= deadline:
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


class WatchedLoader:
    """Iterates a DataLoader built by `watched_loader`; turns a silent hang into a `LoaderHangError`.

    ``last_startup_s`` is how long the workers of the last epoch that started them took to start.
    """

    def __init__(self, loader: DataLoader, timeout: float, dump_dir: str, log: SharedLog) -> None:
        self.loader, self.timeout, self.dump_dir, self.log = loader, timeout, dump_dir, log
        self.last_startup_s: Optional[float] = None

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Any]:
        began = time.time()
        iterator = self._begin_epoch()
        waiting_since = time.time()
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
                waiting_since = time.time()
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
            previous._timeout = 0
        try:
            iterator = iter(self.loader)
        except Exception as e:
            if previous is None:
                raise
            failure = self._failure(previous, e)
            previous = None
            raise failure from None
        forget_worker_pids(iterator)
        iterator._timeout = min(self.timeout, POLL_S)
        return iterator

    def _failure(self, iterator: Any, e: Exception) -> BaseException:
        """The error to raise for ``e``, caught from ``next(iterator)``; the workers are stopped."""
        if _timed_out(e):
            report = self.diagnose(iterator, f"no batch arrived for {self.timeout:g} s", self._hang_fix(iterator))
            self._stop(iterator)
            return LoaderHangError(report)
        dead = (wait_for_a_death(iterator) if (_died_message(e) or is_receive_error(e))
                else _dead_workers(iterator, even_clean=True))
        if dead:
            what = (str(e).splitlines()[0] if _died_message(e)
                    else f"{type(e).__name__} while receiving a batch: {e}")
            report = self.diagnose(iterator, f"a worker died ({what})", _DEATH_FIX, stacks=False)
            self._stop(iterator)
            return LoaderWorkerError(report)
        if is_receive_error(e):
            note = (f"raised in the main process while receiving a batch; every worker was still alive "
                    f"{DEATH_WAIT_S:g} s later, so no worker's death caused it")
        else:
            # An exception raised inside a worker keeps its type; a note says what was being fetched
            # (shown under the traceback from Python 3.11; kept in __notes__ before that).
            note = self._in_flight_summary()
        e.__notes__ = [*getattr(e, "__notes__", []), note]
        self._stop(iterator, kill=False)  # the workers are healthy: one raised, and said so
        return e.with_traceback(None)

    def _still_waiting(self, iterator: Any, began: float, waiting_since: float) -> bool:
        """After a poll found no batch: whether to keep waiting. The hang clock starts when the last batch
        arrived or when the last worker finished starting, whichever is later."""
        started = self._note_startup(iterator, began)
        now = time.time()
        if started is None:
            return now - began < self.timeout + STARTUP_LIMIT_S
        return now - max(waiting_since, started) < self.timeout

    def _note_startup(self, iterator: Any, began: float) -> Optional[float]:
        """When the last of ``iterator``'s workers finished starting (None while one has not); sets
        `last_startup_s` when they were started by this epoch."""
        workers = worker_processes(iterator)
        started = [_read_mark(self.dump_dir, k, "started", w.pid) for k, w in enumerate(workers)]
        if not workers or any(t is None for t in started):
            return None
        last = max(started)  # type: ignore[type-var]
        if min(started) >= began:  # type: ignore[type-var]
            self.last_startup_s = last - began
        return last

    def _hang_fix(self, iterator: Any) -> str:
        workers = worker_processes(iterator)
        if any(_read_mark(self.dump_dir, k, "started", w.pid) is None for k, w in enumerate(workers)):
            return _STARTUP_FIX
        return _HANG_FIX

    def _death_after_epoch(self, iterator: Any) -> Optional[LoaderWorkerError]:
        """A worker killed after its last batch loses nothing, but its death (the OOM killer?) is still news."""
        if not _dead_workers(iterator):
            return None
        report = self.diagnose(iterator, "every batch of the epoch arrived, but a worker died", _DEATH_FIX,
                               stacks=False)
        self._stop(iterator)
        return LoaderWorkerError(report)

    def _stop(self, iterator: Any, kill: bool = True) -> None:
        """Stop ``iterator``'s workers; a persistent loader then starts new ones for its next epoch."""
        _stop_workers(iterator, kill)
        if live_iterator(self.loader) is iterator:
            forget_iterator(self.loader)

    def _in_flight_summary(self) -> str:
        failed = _failed(self.log)
        if not failed:
            return ("no fetch from the dataset raised, so this came from outside it: collate_fn, worker_init_fn or "
                    "the sampler")
        last = failed[-1]
        path_of = getattr(self._user_dataset(), "sample_path", None)
        where = f" (first: {path_of(last['indices'][0])})" if path_of is not None else ""
        return f"raised in worker {last['worker']} while fetching samples [{first(last['indices'], 8)}]{where}"

    def _answers(self, worker_id: int, w: Any) -> bool:
        return _DUMP_SIGNAL is not None and w.is_alive() and _read_mark(self.dump_dir, worker_id, "answers", w.pid) is not None

    def diagnose(self, iterator: Any, headline: str, fix: str, stacks: bool = True) -> str:
        """What each worker of ``iterator`` is doing: alive, starting or dead, samples in flight, and (with
        ``stacks``) the Python stack of each one inside the dataset or still starting."""
        forget_worker_pids(iterator)  # nothing below may be interrupted by a worker's death
        workers = worker_processes(iterator)
        asked = [k for k, w in enumerate(workers) if stacks and self._answers(k, w)]
        for k in asked:
            os.kill(workers[k].pid, _DUMP_SIGNAL)
        if asked:
            time.sleep(0.3)  # let faulthandler write
        fetches = _fetches(self.log)
        dataset = self._user_dataset()
        path_of = getattr(dataset, "sample_path", None)
        lines = [f"{headline}; {len(workers)} worker{'s' if len(workers) != 1 else ''}:"]
        busy = False
        for worker_id, w in enumerate(workers):
            if w.exitcode not in (None, 0):
                state = f"dead ({exit_text(w.exitcode)})"
            elif _read_mark(self.dump_dir, worker_id, "started", w.pid) is None and w.is_alive():
                state = "starting (no stack yet)" if worker_id not in asked else "starting, in worker_init_fn"
            else:
                state = "alive" if w.is_alive() else f"ended ({exit_text(w.exitcode or 0)})"
            line = f"  worker {worker_id} (pid {w.pid}): {state}"
            record = fetches.get(worker_id)
            if record is not None and record["event"] == "start":
                busy = True
                indices = record["indices"]
                since = time.monotonic() - record["time"]
                line += f", fetching samples [{first(indices, 8)}] for {since:.1f} s"
                if path_of is not None:
                    line += f" (first: {path_of(indices[0])})"
            elif record is not None and w.exitcode not in (None, 0):
                line += (f", after its fetch of samples [{first(record['indices'], 8)}] had "
                         f"{'raised' if record['event'] == 'error' else 'finished'} (it died in collate_fn or "
                         "while handing the batch over)")
            else:
                line += ", idle"
            lines.append(line)
            if worker_id in asked and (busy or "starting" in state):
                lines.extend("      " + frame for frame in self._stack(worker_id))
        if not busy and not _dead_workers(iterator) and fix == _HANG_FIX:
            lines.append(_LOST_BATCH.format(shm=memory_facts().describe_shm()))
        if self.last_startup_s is not None:
            lines.append(f"The workers took {self.last_startup_s:.1f} s to start; the timeout counts from then.")
        lines.append(fix)
        return "\n".join(lines)

    def _user_dataset(self) -> Any:
        return self.loader.dataset.dataset if isinstance(self.loader.dataset, FetchLoggedDataset) else self.loader.dataset

    def _stack(self, worker_id: int) -> List[str]:
        path = os.path.join(self.dump_dir, f"worker-{worker_id}.txt")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip() for line in f if line.strip()]
        blocks: List[List[str]] = []
        for line in lines:
            if line.startswith(("Thread ", "Current thread ")) or not blocks:
                blocks.append([])
            blocks[-1].append(line)
        # The thread running the worker loop; its most recent calls come first.
        loop = next((b for b in blocks if any("_worker_loop" in line for line in b)), blocks[0] if blocks else [])
        return [line for line in loop if line.lstrip().startswith("File")][:8]

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
    loader = DataLoader(FetchLoggedDataset(dataset, log), timeout=min(timeout, POLL_S), worker_init_fn=init,
                        **loader_kwargs)
    return WatchedLoader(loader, timeout, dump_dir, log)
