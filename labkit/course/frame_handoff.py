"""What one hand-over of a clip between two processes costs: a torch.multiprocessing queue, or a ring slot.

Notebook 07's two-stage pipeline moves every decoded clip (T×H×W×3 uint8, about 1.8 MiB in quick mode) from the
decode process to the transform process. Put on a `torch.multiprocessing` queue, a tensor that is not in shared
memory yet is moved there when the queue pickles it: a new shared-memory segment per item, its pages written
fresh by the sender, its file descriptor passed over a socket, mapped again by the receiver and unmapped when
the tensor dies. `labkit.workers.staged_pipeline.StagedPipeline` instead writes into one of a few slots of a ring
made once, and sends the slot number: the same copy, into pages already mapped on both sides.

`measure_handoff` times both with the same sender and receiver work — the sender makes a fresh array per item (as
a decode does), the receiver copies it out (as a transform reads it) — in ONE sender process reused for every pass
of both kinds, alternating, so a notebook under the spawn start method pays one process start (torch imports
once), not one per pass. Besides the wall time per item it records the CPU time per item of both processes
(which other programs' load inflates far less than wall time, since waiting for a core is not counted), and the
minor page faults per item in each process (Linux ``/proc``), the measurable trace of a fresh segment per item.
"""

from __future__ import annotations

import queue as queue_module
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil
import torch
import torch.multiprocessing as tmp

from labkit.core.errors import LabkitRuntimeError, LabkitValueError
from labkit.core.timing import Deadline, Stopwatch
from labkit.measure.page_faults import minor_faults

KINDS = ("queue", "ring")
_TIMEOUT_S = 120.0  # a sender start under spawn takes seconds, a hand-over milliseconds


def _send(
    shape: tuple[int, ...],
    items: int,
    ring: torch.Tensor,
    commands: Any,
    handoff: Any,
    ready: Any,
    free: Any,
    done: Any,
) -> None:
    """The sender: for each command ("queue" or "ring"), hand ``items`` fresh clip-sized arrays over that way."""
    torch.set_num_threads(1)
    slots = ring.numpy()
    while (kind := commands.get()) is not None:
        for k in range(items):
            frames = np.full(shape, k % 251, dtype=np.uint8)  # a fresh array per item, as a decode makes
            if kind == "queue":
                handoff.put(torch.from_numpy(frames))  # pickled by torch: moved to a new shared-memory segment
            else:
                slot = free.get()
                np.copyto(slots[slot], frames)  # into a slot mapped once, at the start
                ready.put(slot)
    done.wait()  # a tensor's file descriptor is served by this process until the receiver has taken it


@dataclass
class HandoffReport:
    """Per kind ("queue", "ring"), one value per pass: wall seconds per item, CPU seconds per item (sender and
    receiver together), and minor page faults per item in the sender and in the receiver (``None`` where the OS
    does not count faults)."""

    shape: tuple[int, ...]
    items: int
    seconds: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    cpu_seconds: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    sender_faults: dict[str, list[float | None]] = field(default_factory=lambda: {k: [] for k in KINDS})
    receiver_faults: dict[str, list[float | None]] = field(default_factory=lambda: {k: [] for k in KINDS})

    @property
    def mib(self) -> float:
        return float(np.prod(self.shape)) / 2**20

    def ms(self, kind: str) -> float:
        """Median wall milliseconds per item of ``kind`` (NaN before any pass)."""
        return 1000 * statistics.median(self.seconds[kind]) if self.seconds[kind] else float("nan")

    def cpu_ms(self, kind: str) -> float:
        """Median CPU milliseconds per item of ``kind``, both processes (NaN before any pass)."""
        return 1000 * statistics.median(self.cpu_seconds[kind]) if self.cpu_seconds[kind] else float("nan")

    def faults_per_item(self, kind: str, side: str = "both") -> float | None:
        """Median minor page faults per item in the "sender", the "receiver" or "both"; ``None`` where the OS
        does not count them."""
        if side not in ("sender", "receiver", "both"):
            raise LabkitValueError(f"side={side!r}: one of 'sender', 'receiver', 'both'")
        pairs = zip(self.sender_faults[kind], self.receiver_faults[kind])
        known = [
            (s if side != "receiver" else 0) + (r if side != "sender" else 0)
            for s, r in pairs
            if s is not None and r is not None
        ]
        return statistics.median(known) if known else None

    def __str__(self) -> str:
        lines = [
            f"{self.items} items of {'x'.join(map(str, self.shape))} uint8 ({self.mib:.1f} MiB), "
            f"{len(self.seconds['queue'])} passes each:"
        ]
        for kind, label in (("queue", "torch.multiprocessing queue"), ("ring", "ring slot + slot number")):
            sent, received = self.faults_per_item(kind, "sender"), self.faults_per_item(kind, "receiver")
            lines.append(
                f"  {label:<28} {self.ms(kind):6.2f} ms per item, {self.cpu_ms(kind):5.2f} ms of CPU"
                + (
                    f"; minor page faults per item: sender {sent:4.0f}, receiver {received:4.0f}"
                    if sent is not None and received is not None
                    else ""
                )
            )
        return "\n".join(lines)


def measure_handoff(
    shape: Sequence[int], items: int = 32, passes: int = 3, slots: int = 4, context: str | None = None
) -> HandoffReport:
    """Hand ``items`` arrays of ``shape`` (uint8) from one sender process to this one, ``passes`` times each way,
    alternating queue / ring; the receiver copies each item out before taking the next."""
    if items < 1 or passes < 1 or slots < 1:
        raise LabkitValueError(f"items, passes and slots must be >= 1, got {items}, {passes}, {slots}")
    shape = tuple(int(d) for d in shape)
    ctx = tmp.get_context(context)
    ring = torch.empty((slots, *shape), dtype=torch.uint8).share_memory_()  # one segment, made once
    commands, handoff, ready, free = ctx.Queue(), ctx.Queue(slots), ctx.Queue(slots), ctx.Queue(slots)
    for slot in range(slots):
        free.put(slot)
    done = ctx.Event()
    sender = ctx.Process(
        target=_send,
        args=(shape, items, ring, commands, handoff, ready, free, done),
        daemon=True,
        name="handoff-sender",
    )
    sender.start()
    # Copies with numpy, not torch: torch's idle intra-op threads spin, and on a small machine they take the core
    # the sender needs (and count as CPU time of the hand-over).
    out, slots_view = np.empty(shape, dtype=np.uint8), ring.numpy()
    report = HandoffReport(shape, items)
    me, them = psutil.Process(), psutil.Process(sender.pid)
    try:
        commands.put("ring")  # a warm-up pass: the sender's start (and torch's import under spawn) is not timed
        for _ in range(items):
            free.put(_get(ready, sender))
        for _ in range(passes):
            for kind in KINDS:
                before = minor_faults(sender.pid), minor_faults()
                cpu_before = _cpu(me) + _cpu(them)
                watch = Stopwatch()
                commands.put(kind)
                for _ in range(items):
                    if kind == "queue":
                        np.copyto(out, _get(handoff, sender).numpy())
                    else:
                        slot = _get(ready, sender)
                        np.copyto(out, slots_view[slot])
                        free.put(slot)
                report.seconds[kind].append(watch.elapsed / items)
                report.cpu_seconds[kind].append((_cpu(me) + _cpu(them) - cpu_before) / items)
                after = minor_faults(sender.pid), minor_faults()
                for faults, b, a in zip((report.sender_faults, report.receiver_faults), before, after):
                    faults[kind].append(None if a is None or b is None else (a - b) / items)
        commands.put(None)
    finally:
        done.set()
        sender.join(timeout=10)
        if sender.is_alive():
            sender.kill()
            sender.join(timeout=5)
        for q in (commands, handoff, ready, free):
            q.cancel_join_thread()
            q.close()
    return report


def _cpu(process: psutil.Process) -> float:
    """User + system CPU seconds of ``process``, every thread (a queue pickles in its feeder thread)."""
    times = process.cpu_times()
    return times.user + times.system


def _get(q: Any, sender: Any) -> Any:
    deadline = Deadline(_TIMEOUT_S)
    while True:
        try:
            return q.get(timeout=0.2)
        except queue_module.Empty:
            if not sender.is_alive():
                raise LabkitRuntimeError(f"the hand-over sender died (exit code {sender.exitcode})") from None
            if deadline.expired:
                raise LabkitRuntimeError(f"no item from the hand-over sender in {_TIMEOUT_S:.0f} s") from None
