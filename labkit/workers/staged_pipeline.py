"""A two-stage process pipeline joined by a shared-memory ring (article section 4.3).

Stage 1 (``num_decoders`` processes) turns an item — a clip's frame files, say — into a fixed-size
array written straight into a free slot of a shared-memory ring; stage 2 (``num_transformers``
processes) reads the slot, transforms it (resize, crop, to tensor), frees the slot and sends
the result on. Bounded queues everywhere: a slow stage makes the stage before it wait
instead of filling memory. The stages run at the same time, so throughput is set by the
slower stage alone, not by the sum of both — the point of the article's video example.

Failure is loud and clean: an exception in any stage is re-raised in the main process as
`PipelineError` naming the stage and the item; a worker that dies is named too; and however
the iteration ends (done, error, ``break``, Ctrl-C), every process is stopped and the
shared memory unlinked — except with ``persistent=True`` after an iteration that went through
every item: then the processes and the ring wait for the next iteration (each process start under
spawn or forkserver imports torch again, seconds each), until `StagedPipeline.close`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.timing import Deadline
from labkit.core.torch_internals import exit_text

_STOP = None
_POLL_S = 0.2
_DEATH_WAIT_S = 2.0


class PipelineError(LabkitError, RuntimeError):
    """A stage failed; the message names the stage, the item and the original error."""


def _attach(name: str) -> shared_memory.SharedMemory:
    """Open an existing segment; only the creating process unlinks it.

    Before Python 3.13 attaching registers the name with the resource tracker again, but the
    tracker is shared by the whole process tree and keeps a set, so that is a no-op (and
    unregistering here would drop the creator's registration).
    """
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    return shared_memory.SharedMemory(name=name)


def _ring(shm: shared_memory.SharedMemory, slots: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return np.ndarray((slots, *shape), dtype=dtype, buffer=shm.buf)


def _get(q: Any, stop: Any) -> Any:
    """Next item of ``q``, or _STOP once ``stop`` is set (never blocks longer than _POLL_S at a time)."""
    while not stop.is_set():
        try:
            return q.get(timeout=_POLL_S)
        except queue.Empty:
            continue
    return _STOP


@contextlib.contextmanager
def _worker_ring(name: str, slots: int, shape: tuple[int, ...], dtype: Any) -> Iterator[np.ndarray]:
    """A stage process's view of the ring: single-threaded torch, the segment attached, closed at exit.

    Forked from a parent that ran OpenMP, a process hangs in its first torch parallel region
    unless it stays single-threaded (GNU libgomp is not fork-safe).
    """
    import torch

    torch.set_num_threads(1)
    shm = _attach(name)
    ring = _ring(shm, slots, shape, dtype)
    try:
        yield ring
    finally:
        del ring
        shm.close()


def _failure(stage: str, index: int, error: BaseException) -> tuple[Any, ...]:
    return ("error", stage, index, f"{type(error).__name__}: {error}", traceback.format_exc())


def _decode_loop(
    stage: Callable[[Any], np.ndarray],
    name: str,
    slots: int,
    shape: tuple[int, ...],
    dtype: Any,
    stop: Any,
    tasks: Any,
    free: Any,
    ready: Any,
    results: Any,
) -> None:
    with _worker_ring(name, slots, shape, dtype) as ring:
        while (task := _get(tasks, stop)) is not _STOP:
            index, item = task
            if (slot := _get(free, stop)) is _STOP:
                break
            try:
                ring[slot] = stage(item)
            except BaseException as e:  # noqa: BLE001 - every failure goes back to the main process
                free.put(slot)
                results.put(_failure("stage 1 (decode)", index, e))
                continue
            ready.put((index, slot))


def _transform_loop(
    stage: Callable[[np.ndarray], Any],
    name: str,
    slots: int,
    shape: tuple[int, ...],
    dtype: Any,
    stop: Any,
    ready: Any,
    free: Any,
    results: Any,
) -> None:
    with _worker_ring(name, slots, shape, dtype) as ring:
        while (task := _get(ready, stop)) is not _STOP:
            index, slot = task
            try:
                out = stage(ring[slot])
                out = out.copy() if isinstance(out, np.ndarray) and np.shares_memory(out, ring) else out
            except BaseException as e:  # noqa: BLE001
                results.put(_failure("stage 2 (transform)", index, e))
                continue
            finally:
                free.put(slot)
            results.put(("ok", index, out))


class StagedPipeline:
    """Iterate ``(index, stage2(stage1(items[index])))`` for every item, in completion order.

    ``stage1(item)`` must return an array of ``frame_shape`` and ``dtype``; both stage
    functions must be importable (module-level) so worker processes can find them.

    ``persistent=True`` keeps the processes and the ring from one complete iteration to the next (as a
    DataLoader's ``persistent_workers``); an iteration that ends early still stops everything. Close a
    persistent pipeline with `close` (or use it as a context manager).
    """

    def __init__(
        self,
        items: Sequence[Any],
        stage1: Callable[[Any], np.ndarray],
        stage2: Callable[[np.ndarray], Any],
        frame_shape: Sequence[int],
        dtype: Any = np.uint8,
        num_decoders: int = 1,
        num_transformers: int = 1,
        slots: int = 8,
        context: str | None = None,
        persistent: bool = False,
    ) -> None:
        if num_decoders < 1 or num_transformers < 1 or slots < 1:
            raise LabkitValueError("num_decoders, num_transformers and slots must all be >= 1")
        self.items, self.stage1, self.stage2 = list(items), stage1, stage2
        self.frame_shape, self.dtype = tuple(int(d) for d in frame_shape), np.dtype(dtype)
        self.num_decoders, self.num_transformers, self.slots = num_decoders, num_transformers, slots
        self.ctx = mp.get_context(context)
        self.shm: shared_memory.SharedMemory | None = None
        self.segment: str | None = None  # name of the last ring, kept after it is unlinked (see segment_exists)
        self.processes: list[Any] = []
        self.persistent = persistent
        self._running: tuple[Any, Any, Any, Any, Any] | None = None  # (stop, tasks, ready, free, results)

    def __len__(self) -> int:
        return len(self.items)

    def _start(self) -> tuple[Any, Any, Any, Any, Any]:
        nbytes = self.slots * int(np.prod(self.frame_shape)) * self.dtype.itemsize
        self.shm = shared_memory.SharedMemory(create=True, size=max(1, nbytes))
        self.segment = self.shm.name
        tasks, ready, results = (
            self.ctx.Queue(2 * self.slots),
            self.ctx.Queue(self.slots),
            self.ctx.Queue(2 * self.slots),
        )
        free = self.ctx.Queue(self.slots)
        for slot in range(self.slots):
            free.put(slot)
        stop = self.ctx.Event()
        common = (self.shm.name, self.slots, self.frame_shape, self.dtype, stop)
        self.processes = [
            self.ctx.Process(
                target=_decode_loop,
                args=(self.stage1, *common, tasks, free, ready, results),
                name=f"stage1-{k}",
                daemon=True,
            )
            for k in range(self.num_decoders)
        ] + [
            self.ctx.Process(
                target=_transform_loop,
                args=(self.stage2, *common, ready, free, results),
                name=f"stage2-{k}",
                daemon=True,
            )
            for k in range(self.num_transformers)
        ]
        for p in self.processes:
            p.start()
        return stop, tasks, ready, free, results

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        if self._running is None:
            self._running = self._start()
        stop, tasks, ready, free, results = self._running
        stop_feeding = threading.Event()

        def feed() -> None:
            for index in range(len(self.items)):
                while not stop_feeding.is_set():
                    try:
                        tasks.put((index, self.items[index]), timeout=_POLL_S)
                        break
                    except queue.Full:
                        continue

        feeder = threading.Thread(target=feed, name="pipeline-feeder", daemon=True)
        feeder.start()
        finished = False
        died: list[str] = []
        try:
            for _ in range(len(self.items)):
                message = self._next_result(results)
                if message[0] == "error":
                    _, stage, index, error, trace = message
                    raise PipelineError(
                        f"{stage} failed on item {index} ({self.items[index]!r}): {error}\n"
                        f"--- traceback in the worker ---\n{trace}"
                    )
                yield message[1], message[2]
            finished = True  # every task taken, every slot free again: a persistent pipeline can go on
        finally:
            stop_feeding.set()
            if not (finished and self.persistent):
                stop.set()
            feeder.join()
            if not (finished and self.persistent):
                died = self._stop()
        if died:  # every item arrived, but a stage was ended by something else (the OOM killer, a kill -9)
            raise PipelineError(
                f"{died[0]} while the pipeline ran: every item was delivered, but something outside "
                "the pipeline ended it (the kernel's OOM killer, a kill); find what before trusting "
                "the next run"
            )

    def close(self) -> None:
        """Stop every process and unlink the ring (a no-op when nothing runs)."""
        self._stop()

    def _stop(self) -> list[str]:
        """Stop every process and unlink the ring; the stages that had ended by themselves (not stopped or killed
        here) with an exit code other than 0, named with it."""
        if self._running is None:
            return []
        stop, *queues = self._running
        self._running = None
        stop.set()
        died = self._shutdown()
        for q in queues:
            q.cancel_join_thread()
            q.close()
        return died

    def __enter__(self) -> StagedPipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _next_result(self, results: Any) -> tuple[Any, ...]:
        while True:
            try:
                return results.get(timeout=_POLL_S)
            except queue.Empty:
                broken: BaseException | None = None
            except (ConnectionError, EOFError, OSError) as e:
                # A stage killed while it hands a result over breaks the connection its tensors' file
                # descriptors come through; the kernel shows its exit code a moment later.
                broken = e
            dead = self._dead(wait_s=_DEATH_WAIT_S if broken is not None else 0.0)
            if dead:
                p = dead[0]
                raise PipelineError(
                    f"{p.name} (pid {p.pid}) died ({exit_text(p.exitcode)}) before the pipeline finished"
                ) from None
            if broken is not None:
                raise PipelineError(
                    f"receiving a result failed ({type(broken).__name__}: {broken}) while every stage "
                    f"process was still alive {_DEATH_WAIT_S:g} s later"
                ) from broken

    def _dead(self, wait_s: float) -> list[Any]:
        """The stage processes that have ended, waiting up to ``wait_s`` for one to show its exit code."""
        deadline = Deadline(wait_s)
        while True:
            dead = [p for p in self.processes if p.exitcode is not None]
            if dead or deadline.expired:
                return dead
            time.sleep(0.02)

    def _shutdown(self) -> list[str]:
        """Every process has been told to stop; wait briefly, kill what is left, unlink the ring. Returns the
        processes that ended with an exit code other than 0 before this killed anything."""
        for p in self.processes:
            p.join(timeout=2)
        died = [
            f"{p.name} (pid {p.pid}) died ({exit_text(p.exitcode)})"
            for p in self.processes
            if p.exitcode not in (None, 0)
        ]
        for p in self.processes:
            if p.is_alive():
                p.kill()
                p.join(timeout=2)
        self.processes = []
        if self.shm is not None:
            self.shm.close()
            self.shm.unlink()
            self.shm = None
        return died


def segment_exists(name: str) -> bool:
    """Whether a shared-memory segment of that name still exists: after a pipeline ends, however it
    ends, its ring (``pipeline.segment``) must not."""
    try:
        segment = _attach(name)
    except FileNotFoundError:
        return False
    segment.close()
    return True
