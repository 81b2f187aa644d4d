"""A watchdog for DataLoader workers: when one hangs or dies, say who was doing what, then fail cleanly.

A stuck worker (a deadlock after fork, a read from a dead network mount, a decode that
never returns) makes a plain DataLoader wait forever, or with ``timeout=`` raise a bare
"DataLoader timed out". `WatchedLoader` instead reports, for every worker: whether it is
alive, which samples it was fetching and for how long, and its Python stack (dumped by
``faulthandler`` inside the worker), then shuts the workers down and raises
`LoaderHangError`. A worker killed by a signal becomes a `LoaderWorkerError` naming it and its
samples in flight; an exception raised in a worker keeps its type and gains a note saying
which samples were in flight. After any of these the workers are stopped at once (a plain
DataLoader leaves them running until the garbage collector frees its iterator, and then waits
5 s for each), and the next epoch starts fresh ones, persistent or not. It needs
``num_workers > 0``: a hang in the main process is your own stack, which
``faulthandler.dump_traceback_later`` prints.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

from torch.utils.data import DataLoader, Dataset, get_worker_info

from labkit.doctor import memory_facts
from labkit.eventlog import SharedLog

_DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)
_kept_open: List[Any] = []  # in each worker: the file faulthandler writes to must stay open


_HANG_FIX = ("Fix: find the call in the stacks above; set a timeout on I/O there, and check `labkit doctor` "
             "for fork-after-threads and thread oversubscription")
_DEATH_FIX = ("Fix: exit code -9 is usually the out-of-memory killer, -7 (SIGBUS) a full /dev/shm: lower "
              "num_workers, prefetch_factor or the batch size; `labkit doctor` estimates both")
_LOST_BATCH = ("No worker is inside the dataset, so the wait is in collate_fn or a finished batch was lost: a "
               "worker that cannot move a batch it returned into a full /dev/shm prints 'unable to allocate "
               "shared memory ... No space left on device' on its stderr and drops the batch. /dev/shm: {shm}. "
               "If it is nearly full: lower num_workers, prefetch_factor or the batch size (`labkit doctor`)")


class LoaderHangError(RuntimeError):
    """No batch arrived within the watchdog's timeout; the message says what each worker was doing."""


class LoaderWorkerError(RuntimeError):
    """A worker process died (killed by a signal, out of memory, a crash in C code); the message says
    which, and which samples it and the others were fetching."""


class StackDumpInit:
    """``worker_init_fn`` that lets the main process ask a worker for its stack, then runs yours."""

    def __init__(self, dump_dir: str, user_init: Optional[Callable[[int], None]] = None) -> None:
        self.dump_dir, self.user_init = dump_dir, user_init

    def __call__(self, worker_id: int) -> None:
        if _DUMP_SIGNAL is not None and hasattr(faulthandler, "register"):
            f = open(os.path.join(self.dump_dir, f"worker-{worker_id}.txt"), "w")
            _kept_open.append(f)
            faulthandler.register(_DUMP_SIGNAL, file=f, all_threads=True)
        if self.user_init is not None:
            self.user_init(worker_id)


class TrackedDataset(Dataset):
    """Passes samples through, noting which samples each worker has started and finished."""

    def __init__(self, dataset: Dataset, log: SharedLog) -> None:
        self.dataset, self.log = dataset, log

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:  # labels, classes, sample_path... of the wrapped dataset
        if name in ("dataset", "log"):
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def _note(self, event: str, indices: List[int]) -> None:
        info = get_worker_info()
        self.log.append({"worker": info.id if info else -1, "event": event, "indices": indices,
                         "time": time.monotonic()})

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: List[int]) -> List[Any]:
        self._note("start", [int(i) for i in indices])
        fetch = getattr(self.dataset, "__getitems__", None)
        try:
            samples = fetch(indices) if fetch else [self.dataset[i] for i in indices]
        except BaseException:
            self._note("error", [int(i) for i in indices])
            raise
        self._note("end", [int(i) for i in indices])
        return samples


def _in_flight(log: SharedLog) -> Dict[int, Dict[str, Any]]:
    """For each worker, its last started fetch if it has not finished it."""
    current: Dict[int, Dict[str, Any]] = {}
    for record in log.records():
        if record["event"] == "start":
            current[record["worker"]] = record
        else:
            current.pop(record["worker"], None)
    return current


def _failed(log: SharedLog) -> List[Dict[str, Any]]:
    """Fetches that raised, oldest first."""
    return [r for r in log.records() if r["event"] == "error"]


def _shm_state() -> str:
    facts = memory_facts()
    if not facts.shm_total:
        return "none on this OS"
    return f"{facts.shm_free / 2**20:.1f} MiB free of {facts.shm_total / 2**20:.1f} MiB"


def _stop_workers(iterator: Any, kill: bool = True) -> None:
    """Stop every worker: killed at once when one is stuck or dead (a stuck one will not answer a polite
    shutdown), else asked to finish first — a worker killed while it makes a batch can leave that
    batch's /dev/shm file behind."""
    from torch.utils.data._utils import signal_handling

    try:
        if getattr(iterator, "_worker_pids_set", False):
            signal_handling._remove_worker_pids(id(iterator))  # or their deaths raise in this thread
            iterator._worker_pids_set = False
        if kill:
            for w in getattr(iterator, "_workers", []):
                if w.is_alive():
                    w.kill()
            for w in getattr(iterator, "_workers", []):
                w.join(timeout=5)
    finally:
        iterator._shutdown_workers()


def _dead_workers(iterator: Any) -> List[Any]:
    """Workers of ``iterator`` that ended with an error or a signal (exit code not 0)."""
    return [w for w in getattr(iterator, "_workers", []) if w.exitcode not in (None, 0)]


class WatchedLoader:
    """Iterates a DataLoader built by `watched_loader`; turns a silent hang into a `LoaderHangError`."""

    def __init__(self, loader: DataLoader, timeout: float, dump_dir: str, log: SharedLog) -> None:
        self.loader, self.timeout, self.dump_dir, self.log = loader, timeout, dump_dir, log

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Any]:
        iterator = iter(self.loader)
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            except Exception as e:
                message = str(e)
                if isinstance(e, RuntimeError) and "timed out" in message:
                    report = self.diagnose(iterator, f"no batch arrived for {self.timeout:g} s", _HANG_FIX)
                    self._stop(iterator)
                    raise LoaderHangError(report) from None
                died = isinstance(e, RuntimeError) and ("killed by signal" in message or "exited unexpectedly" in message)
                if died or _dead_workers(iterator):
                    # A worker killed while it hands over a batch can also surface as a broken connection
                    # (ConnectionResetError, EOFError) in the main process: the cause is still the death.
                    what = message.splitlines()[0] if died else f"{type(e).__name__} while receiving a batch: {message}"
                    report = self.diagnose(iterator, f"a worker died ({what})", _DEATH_FIX)
                    self._stop(iterator)
                    raise LoaderWorkerError(report) from None
                # An exception raised inside a worker keeps its type; a note says what was being fetched
                # (shown under the traceback from Python 3.11; kept in __notes__ before that).
                e.__notes__ = [*getattr(e, "__notes__", []), self._in_flight_summary()]
                self._stop(iterator, kill=False)  # the workers are healthy: one raised, and said so
                raise
            yield batch

    def _stop(self, iterator: Any, kill: bool = True) -> None:
        """Stop ``iterator``'s workers; a persistent loader then starts new ones for its next epoch."""
        _stop_workers(iterator, kill)
        if getattr(self.loader, "_iterator", None) is iterator:
            self.loader._iterator = None

    def _in_flight_summary(self) -> str:
        failed = _failed(self.log)
        if not failed:
            return "the samples that failed were not recorded"
        last = failed[-1]
        path_of = getattr(self._user_dataset(), "sample_path", None)
        where = f" (first: {path_of(last['indices'][0])})" if path_of is not None else ""
        return f"raised in worker {last['worker']} while fetching samples {last['indices'][:8]}{where}"

    def diagnose(self, iterator: Any, headline: str, fix: str) -> str:
        """What each worker of ``iterator`` is doing: alive, samples in flight, Python stack."""
        workers = list(getattr(iterator, "_workers", []))
        for w in workers:
            if w.is_alive() and _DUMP_SIGNAL is not None:
                os.kill(w.pid, _DUMP_SIGNAL)
        time.sleep(0.3)  # let faulthandler write
        busy = _in_flight(self.log)
        dataset = self._user_dataset()
        lines = [f"{headline}; {len(workers)} workers:"]
        for worker_id, w in enumerate(workers):
            state = "alive" if w.is_alive() else f"dead (exit code {w.exitcode})"
            line = f"  worker {worker_id} (pid {w.pid}): {state}"
            if worker_id in busy:
                indices = busy[worker_id]["indices"]
                since = time.monotonic() - busy[worker_id]["time"]
                line += f", fetching samples {indices[:8]}{'...' if len(indices) > 8 else ''} for {since:.1f} s"
                path_of = getattr(dataset, "sample_path", None)
                if path_of is not None:
                    line += f" (first: {path_of(indices[0])})"
            else:
                line += ", idle"
            lines.append(line)
            if worker_id in busy and w.is_alive():
                lines.extend("      " + frame for frame in self._stack(worker_id))
        if not busy:
            lines.append(_LOST_BATCH.format(shm=_shm_state()))
        lines.append(fix)
        return "\n".join(lines)

    def _user_dataset(self) -> Any:
        return self.loader.dataset.dataset if isinstance(self.loader.dataset, TrackedDataset) else self.loader.dataset

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
    """``DataLoader(dataset, **loader_kwargs)`` whose hang after ``timeout`` seconds is explained."""
    if loader_kwargs.get("num_workers", 0) < 1:
        raise ValueError("the hang watchdog watches worker processes: use num_workers >= 1")
    dump_dir = tempfile.mkdtemp(prefix="labkit-stacks-")
    log = SharedLog("labkit-inflight-")
    init = StackDumpInit(dump_dir, loader_kwargs.pop("worker_init_fn", None))
    loader = DataLoader(TrackedDataset(dataset, log), timeout=timeout, worker_init_fn=init, **loader_kwargs)
    return WatchedLoader(loader, timeout, dump_dir, log)
