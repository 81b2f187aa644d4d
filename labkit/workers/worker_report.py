"""What each worker of a watched loader is doing, in words: alive, starting or dead, the samples it is fetching
and for how long, and its Python stack; the report a `labkit.workers.watchdog.WatchedLoader` raises with.

Kept apart from the watching (when to poll, what counts as a hang or a death): this part only reads what the
workers left (`labkit.workers.worker_marks`) and says it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from labkit.core.machine import memory_facts
from labkit.core.shared_log import SharedLog
from labkit.core.timing import timestamp
from labkit.core.torch_internals import exit_text, forget_worker_pids, worker_processes
from labkit.core.wording import first
from labkit.workers.worker_marks import DUMP_SIGNAL, answers, failed_fetches, last_fetches, read_mark, worker_stack

HANG_FIX = (
    "Fix: find the call in the stacks above; set a timeout on I/O there, and check `labkit doctor` "
    "for fork-after-threads and thread oversubscription"
)
DEATH_FIX = (
    "Fix: exit code -9 (SIGKILL) is usually the out-of-memory killer, -7 (SIGBUS) a full /dev/shm: "
    "lower num_workers, prefetch_factor or the batch size; `labkit doctor` estimates both"
)
LOST_BATCH = (
    "No worker is inside the dataset, so the wait is in collate_fn or a finished batch was lost: a "
    "worker that cannot move a batch it returned into a full /dev/shm prints 'unable to allocate "
    "shared memory ... No space left on device' on its stderr and drops the batch. /dev/shm: {shm}. "
    "If it is nearly full: lower num_workers, prefetch_factor or the batch size (`labkit doctor`)"
)
STARTUP_FIX = (
    "Fix: a worker that never finishes starting is stuck unpickling the dataset or in worker_init_fn "
    "(the stacks above show which, where a worker got far enough to answer); under spawn or "
    "forkserver each worker also imports torch and your dataset's module afresh"
)


def dead_workers(iterator: Any, even_clean: bool = False) -> list[Any]:
    """Workers of ``iterator`` that ended with an error or a signal (exit code not 0); with ``even_clean``,
    also those that ended cleanly (before the loader shut them down, any end is unexpected)."""
    return [w for w in worker_processes(iterator) if w.exitcode is not None and (even_clean or w.exitcode != 0)]


class WorkerReport:
    """Reads what the workers of one watched loader left in ``dump_dir`` and ``log``, and says it; ``dataset``
    (the user's, unwrapped) names a sample's file where it can (``sample_path``)."""

    def __init__(self, dump_dir: str, log: SharedLog, dataset: Any) -> None:
        self.dump_dir, self.log, self.dataset = dump_dir, log, dataset

    def all_started(self, iterator: Any) -> bool:
        return all(
            read_mark(self.dump_dir, k, "started", w.pid) is not None for k, w in enumerate(worker_processes(iterator))
        )

    def hang_fix(self, iterator: Any) -> str:
        """The fix for a hang: in the dataset or collate (`HANG_FIX`), or in a worker's start (`STARTUP_FIX`)."""
        return HANG_FIX if self.all_started(iterator) else STARTUP_FIX

    def in_flight_summary(self) -> str:
        """Which worker raised while fetching which samples, for the note on an error raised in a worker."""
        failed = failed_fetches(self.log)
        if not failed:
            return (
                "no fetch from the dataset raised, so this came from outside it: collate_fn, worker_init_fn or "
                "the sampler"
            )
        last = failed[-1]
        path_of = getattr(self.dataset, "sample_path", None)
        where = f" (first: {path_of(last['indices'][0])})" if path_of is not None else ""
        return f"raised in worker {last['worker']} while fetching samples [{first(last['indices'], 8)}]{where}"

    def describe(
        self, iterator: Any, headline: str, fix: str, stacks: bool = True, startup_s: float | None = None
    ) -> str:
        """What each worker of ``iterator`` is doing: alive, starting or dead, samples in flight, and (with
        ``stacks``) the Python stack of each one inside the dataset or still starting; ``startup_s``: how long
        the workers took to start, where known."""
        forget_worker_pids(iterator)  # nothing below may be interrupted by a worker's death
        workers = worker_processes(iterator)
        asked = [k for k, w in enumerate(workers) if stacks and answers(self.dump_dir, k, w)]
        for k in asked:
            os.kill(workers[k].pid, DUMP_SIGNAL)  # type: ignore[arg-type]
        if asked:
            time.sleep(0.3)  # let faulthandler write
        fetches = last_fetches(self.log)
        path_of = getattr(self.dataset, "sample_path", None)
        lines = [f"{headline}; {len(workers)} worker{'s' if len(workers) != 1 else ''}:"]
        busy = False
        for worker_id, w in enumerate(workers):
            if w.exitcode not in (None, 0):
                state = f"dead ({exit_text(w.exitcode)})"
            elif read_mark(self.dump_dir, worker_id, "started", w.pid) is None and w.is_alive():
                state = "starting (no stack yet)" if worker_id not in asked else "starting, in worker_init_fn"
            else:
                state = "alive" if w.is_alive() else f"ended ({exit_text(w.exitcode or 0)})"
            line = f"  worker {worker_id} (pid {w.pid}): {state}"
            record = fetches.get(worker_id)
            if record is not None and record["event"] == "start":
                busy = True
                indices = record["indices"]
                line += f", fetching samples [{first(indices, 8)}] for {timestamp() - record['time']:.1f} s"
                if path_of is not None:
                    line += f" (first: {path_of(indices[0])})"
            elif record is not None and w.exitcode not in (None, 0):
                line += (
                    f", after its fetch of samples [{first(record['indices'], 8)}] had "
                    f"{'raised' if record['event'] == 'error' else 'finished'} (it died in collate_fn or "
                    "while handing the batch over)"
                )
            else:
                line += ", idle"
            lines.append(line)
            if worker_id in asked and (busy or "starting" in state):
                lines.extend("      " + frame for frame in worker_stack(self.dump_dir, worker_id))
        if not busy and not dead_workers(iterator) and fix == HANG_FIX:
            lines.append(LOST_BATCH.format(shm=memory_facts().describe_shm()))
        if startup_s is not None:
            lines.append(f"The workers took {startup_s:.1f} s to start; the timeout counts from then.")
        lines.append(fix)
        return "\n".join(lines)
