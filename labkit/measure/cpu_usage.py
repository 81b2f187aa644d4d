"""Per-core CPU use sampled while a loop runs: the article's ``htop`` advice (section 7) as a measurement.

Watching ``htop`` during training, the article reads two pictures: some cores idle for long stretches
(too few workers, or workers stuck waiting on I/O) and every core busy while the GPU waits (the
device side, or the copy to it, needs the work). `CoreSampler` records the same picture — busy and
I/O-wait shares of each core this process may use, every ``interval`` seconds, from a background
thread — and `CoreUsage.reading` says which of the two it is. The counters are the whole machine's:
other programs' work shows too, so the reading also says how much of it was this process and its
workers (the rest was someone else's). Where the OS does not report I/O wait (macOS, Windows) it is
``None`` and the reading says so, rather than zeros that would read as "no core waited".
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil

from labkit.core.environment import usable_cpu_ids
from labkit.core.errors import LabkitValueError
from labkit.core.machine import os_name
from labkit.core.plotting import pyplot
from labkit.core.timing import Stopwatch
from labkit.measure.process_memory import cpu_seconds, descendants
from labkit.workers.step_report import MODEL_BOUND

BUSY = 70.0  # percent: a core above this, on average over the run, counts as busy
IDLE = 30.0  # percent: a core below this counts as idle
IO_WAIT = 10.0  # percent of a core's time waiting on I/O that is worth naming
CROWDED = 0.25  # other programs' share of the cores' time above which a reading cannot be trusted


@dataclass
class CoreUsage:
    """Samples of each core's busy and I/O-wait share (percent) over a run, and this process tree's share."""

    times: np.ndarray  # seconds from the start of sampling to the end of each sample
    busy: np.ndarray  # samples × cores: 100 − idle − iowait
    iowait: np.ndarray | None  # samples × cores; None where the OS does not report it (macOS, Windows)
    cores: list[int]
    own_share: float  # CPU time of this process and its workers / (wall time × cores)

    @property
    def mean_busy(self) -> np.ndarray:
        return self.busy.mean(axis=0) if len(self.busy) else np.zeros(len(self.cores))

    @property
    def mean_iowait(self) -> np.ndarray | None:
        """Each core's average I/O-wait share; ``None`` where the OS does not report I/O wait."""
        if self.iowait is None:
            return None
        return self.iowait.mean(axis=0) if len(self.iowait) else np.zeros(len(self.cores))

    def idle_cores(self, threshold: float = IDLE) -> list[int]:
        """Cores whose average busy share stayed under ``threshold`` percent."""
        return [core for core, busy in zip(self.cores, self.mean_busy) if busy < threshold]

    def reading(self, data_share: float | None = None, busy: float = BUSY, idle: float = IDLE) -> str:
        """What the picture says, in the article's terms. ``data_share``: the share of each step the loop
        waited for data (`labkit.workers.profiled_loader.LoaderReport.data_share`), when a model step was timed."""
        if not len(self.busy):
            return "no sample taken: the run was shorter than one sampling interval"
        means = self.mean_busy
        overall = float(means.mean())
        others = max(0.0, overall / 100 - self.own_share)
        own_cores = self.own_share * len(self.cores)
        lines = [
            f"{len(self.cores)} cores busy on average "
            + ", ".join(f"{m:.0f} %" for m in means)
            + f" ({len(self.times)} samples); this process and its workers used {self.own_share:.0%} of them"
            + (f", other programs about {others:.0%}" if others >= 0.05 else "")
        ]
        idle_cores = self.idle_cores(idle)
        mean_iowait = self.mean_iowait
        if mean_iowait is None:
            lines.append(f"I/O wait is not available on {os_name()}: whether cores wait on the storage is not known")
            waiting = []
        else:
            waiting = [c for c, w in zip(self.cores, mean_iowait) if w >= IO_WAIT]
        if waiting:
            lines.append(
                f"cores {waiting} spent over {IO_WAIT:.0f} % of the run waiting on I/O: the storage is slow "
                "for this access pattern (pack the files, keep them on local disk, leave room in the page "
                "cache); more workers only queue more reads"
            )
        if idle_cores:
            lines.append(
                f"cores {idle_cores} stayed mostly idle (under {idle:.0f} %): there is room for more "
                "workers, or the workers are waiting on something other than the CPU"
            )
        elif means.min() >= busy:
            if others >= CROWDED:
                lines.append(
                    f"every core busy, but this process and its workers had only {own_cores:.1f} of the "
                    f"{len(self.cores)} cores' time: other programs' work hides whether more workers would "
                    "help (they would have to win cores from those programs); rerun on a quieter machine "
                    "before acting on this"
                )
            elif data_share is not None and data_share < MODEL_BOUND:
                lines.append(
                    "every core busy and the loop hardly waits for data: the compute side sets the pace. "
                    "On a GPU machine, cores this busy while the GPU's busy share is low point at the "
                    "device side or the copy to it"
                )
            else:
                lines.append(
                    "every core busy: by the article's reading the CPU is the limit and more workers should not "
                    "help; decode less (a faster decoder, a decoded pack), move work to the device, or get more "
                    "cores. Busy is not always useful (a thread spinning while it waits looks busy): check the "
                    "reading against a measured rate"
                )
        else:
            lines.append(
                f"cores between {idle:.0f} and {busy:.0f} % busy: neither picture is clear; "
                "profile_loader's wait share says which side to look at"
            )
        if others >= CROWDED and not (means.min() >= busy and not idle_cores):
            lines.append(
                "other programs took a large share of these cores: rerun on a quieter machine before acting on this"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None, title: str = "") -> Any:
        """One line per core: its busy share over the run (percent), I/O wait shaded below."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(7, 2.8), dpi=90)[1]
        for k, core in enumerate(self.cores):
            (line,) = ax.plot(self.times, self.busy[:, k], label=f"core {core} busy", drawstyle="steps-post")
            if self.iowait is not None and self.iowait[:, k].any():
                ax.fill_between(
                    self.times,
                    0,
                    self.iowait[:, k],
                    step="post",
                    alpha=0.3,
                    color=line.get_color(),
                    label=f"core {core} I/O wait",
                )
        ax.set_ylim(0, 105)
        ax.set_xlabel("seconds since sampling began")
        ax.set_ylabel("CPU busy (%)")
        ax.set_title(title or f"Per-core CPU use ({len(self.cores)} cores)")
        ax.legend(fontsize="small", loc="lower right")
        return ax


def time_shares(before: Any, after: Any) -> Any | None:
    """One core's CPU times between two ``psutil.cpu_times`` readings, as percentages of the interval (the same
    named fields); ``None`` when no clock tick fell between them.

    Computed here rather than by ``psutil.cpu_times_percent``: that scales by ``100 / max(1, total)``, so an
    interval under a second per core comes out as a fraction of a second, not of the interval, and an idle core
    sampled every 0.2 s reads 20 % idle, that is 80 % busy (psutil issue #1586).
    """
    deltas = [max(0.0, b - a) for a, b in zip(before, after)]
    fields = getattr(after, "_fields", ())
    total = sum(d for d, name in zip(deltas, fields) if name not in ("guest", "guest_nice"))  # inside user, nice
    if total <= 0:
        return None
    return type(after)(*(100.0 * d / total for d in deltas))


class CoreSampler:
    """``with CoreSampler(0.2) as sampler: run()`` — then ``sampler.usage`` holds the per-core picture.

    A background thread reads each core's CPU times every ``interval`` seconds (``psutil.cpu_times``,
    turned into shares of the interval by `time_shares`) and sleeps in between, so it costs next to
    nothing; leaving the block samples the last, shorter interval. This process's and its workers' CPU
    time is read at each sample too, for `CoreUsage.own_share`.
    """

    def __init__(self, interval: float = 0.2) -> None:
        if interval <= 0:
            raise LabkitValueError(f"interval must be > 0 seconds, got {interval}")
        self.interval = interval
        self.cores = usable_cpu_ids()
        self.usage: CoreUsage | None = None
        self._stop = threading.Event()
        self._samples: list[Any] = []
        self._times: list[float] = []
        self._thread: threading.Thread | None = None

    def _tree_cpu(self) -> None:
        """CPU seconds of this process and each live descendant, kept per process: a worker that ends
        before the block does still counts with what it used (its last reading)."""
        for pid in [os.getpid(), *descendants()]:
            seconds = cpu_seconds(pid)
            if seconds is not None:
                self._cpu_last[pid] = max(self._cpu_last.get(pid, 0.0), seconds)

    def _run(self) -> None:
        while True:
            stopped = self._stop.wait(self.interval)  # the last, shorter interval is sampled too
            now = psutil.cpu_times(percpu=True)
            sample = [time_shares(a, b) for a, b in zip(self._last, now)]
            self._last = now
            if all(core is not None for core in sample):  # an interval too short for the clock's ticks is skipped
                self._times.append(self._watch.elapsed)
                self._samples.append(sample)
            self._tree_cpu()
            if stopped:
                return

    def __enter__(self) -> CoreSampler:
        self._watch = Stopwatch()
        self._cpu_last: dict[int, float] = {}
        self._tree_cpu()
        self._cpu_first = dict(self._cpu_last)  # processes started later begin at zero
        self._last = psutil.cpu_times(percpu=True)  # the first interval starts now
        self._thread = threading.Thread(target=self._run, name="labkit-core-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._tree_cpu()
        wall = self._watch.elapsed
        used = sum(last - self._cpu_first.get(pid, 0.0) for pid, last in self._cpu_last.items())
        own = used / (wall * len(self.cores)) if wall > 0 else 0.0
        width = min((len(s) for s in self._samples), default=len(self.cores))
        cores = self.cores if all(c < width for c in self.cores) else list(range(width))  # ids past the list: hotplug
        busy = np.array(
            [[100.0 - s[c].idle - getattr(s[c], "iowait", 0.0) for c in cores] for s in self._samples]
        ).reshape(-1, len(cores))
        reported = all(hasattr(s[c], "iowait") for s in self._samples for c in cores)  # not on macOS, Windows
        iowait = (
            np.array([[s[c].iowait for c in cores] for s in self._samples]).reshape(-1, len(cores))
            if reported
            else None
        )
        self.usage = CoreUsage(np.array(self._times), np.clip(busy, 0, 100), iowait, cores, min(1.0, own))
