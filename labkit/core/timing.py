"""The one place labkit reads a clock: every measurement in the kit and its benchmarks times through here.

Why one place: timings that disagree on their statistic (the best pass here, the median there) or on what they
count (the wait for a batch, or the wait plus the step) cannot be put side by side. Here a pass is timed one way
(`Stopwatch`, monotonic and high-resolution), a loop's waits one way (`timed`), repeated calls one way
(`time_calls`: warm-up calls left out, then passes), and the passes summed up one way (`Passes`: the median for
the figure, the lowest and highest for the spread `labkit.measure.verdict.judge` needs). Deadlines (`Deadline`)
and time stamps shared between processes (`timestamp`) are read here too, so a test can check that no other
module reads a clock (``tests/project/test_package.py``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from labkit.core.errors import LabkitValueError

T = TypeVar("T")


def timestamp() -> float:
    """A time stamp in seconds that every process of this machine reads from one clock (monotonic: it never
    jumps with the wall clock), for records compared across processes: a worker's heartbeat, a fetch's start and
    end. A duration in one process is a `Stopwatch`'s."""
    return time.monotonic()


class Stopwatch:
    """Seconds since it was made (`elapsed`), or since the last `lap`: one pass, one step, one span."""

    def __init__(self) -> None:
        self.started = self._last = time.perf_counter()

    @property
    def elapsed(self) -> float:
        """Seconds since the stopwatch was made."""
        return time.perf_counter() - self.started

    def lap(self) -> float:
        """Seconds since the last lap (or since the start), and a new lap begins."""
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        return seconds


class Deadline:
    """A moment ``seconds`` from now, for waits that must end: `expired`, `remaining`."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    @property
    def remaining(self) -> float:
        """Seconds left, never below 0."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at


def timed(items: Iterable[T]) -> Iterator[tuple[float, T]]:
    """Each item of ``items`` with the seconds the caller waited for it: a loader's batches, with the wait for
    each (the caller's own work between two items is not counted)."""
    iterator = iter(items)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield time.perf_counter() - t0, item


@dataclass(frozen=True)
class Passes:
    """The seconds of repeated passes of one thing, and what is read from them: the median (the figure quoted),
    the best (a floor on what the thing costs), the spread (lowest, highest) that a verdict weighs."""

    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.seconds:
            raise LabkitValueError("no pass was timed: time at least one")

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.seconds), max(self.seconds)

    def per_second(self, count: float) -> list[float]:
        """Each pass as a rate: ``count`` things (images, bytes) per second."""
        return [count / s for s in self.seconds]

    def __len__(self) -> int:
        return len(self.seconds)


def time_calls(fn: Callable[[], Any], repeats: int, warmup: int = 0) -> Passes:
    """``warmup`` calls of ``fn`` left untimed (imports, first allocations, cold caches), then ``repeats`` timed."""
    if repeats < 1:
        raise LabkitValueError(f"repeats={repeats}: time at least one call")
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(repeats):
        watch = Stopwatch()
        fn()
        seconds.append(watch.elapsed)
    return Passes(tuple(seconds))
