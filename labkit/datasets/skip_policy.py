"""``on_error="skip"``: a broken sample replaced by a loadable one, the same in every process and every run, and
recorded once in a log every DataLoader worker writes to.

The substitute for sample ``i`` is the first loadable sample of a fixed probe sequence (``i``, ``i + s``,
``i + 2s``, … modulo the dataset's length, ``s`` coprime with it near 0.618 of it), so a resumed run substitutes
what the uninterrupted one did, and the substitute comes from another part of the set (usually another class).
Samples a process already found broken are passed over without being decoded again; a read that may succeed later
(EIO, EMFILE) is not remembered as broken.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from labkit.core.shared_log import SharedLog
from labkit.datasets.sample_errors import LASTING_ERRORS, SampleError, SkipRecord

T = TypeVar("T")


def probe_stride(n: int) -> int:
    """A step coprime with ``n`` near 0.618 n: stepping by it from any sample visits every other one,
    the first few far away."""
    stride = max(1, round(n * 0.6180339887))
    while math.gcd(stride, n) != 1:
        stride += 1
    return stride


def summarise_skips(events: list[dict[str, Any]]) -> list[SkipRecord]:
    """One record per broken sample, oldest first, substitutions added up over every process."""
    first: dict[int, dict[str, Any]] = {}
    substitutions: dict[int, int] = {}
    for e in events:
        first.setdefault(e["index"], e)
        substitutions[e["index"]] = substitutions.get(e["index"], 0) + int(e["substituted"])
    return [SkipRecord(i, e["path"], e["error"], substitutions[i]) for i, e in first.items()]


class SkipPolicy:
    """Substitutes and records broken samples for one dataset; it pickles with the dataset into every worker, whose
    records land in the same log (`labkit.core.shared_log.SharedLog`)."""

    def __init__(self) -> None:
        self.log = SharedLog("labkit-skips-")
        self.known_broken: dict[int, str] = {}  # this process's: index -> error, never decoded again here

    def fetch(self, index: int, n: int, load: Callable[[int], T], path_of: Callable[[int], str]) -> T:
        """``load(index)``, or ``load`` of its substitute where ``index`` raises `SampleError` (each broken sample met
        recorded); a `SampleError` when all ``n`` samples fail."""
        stride = probe_stride(n)
        for k in range(n):
            candidate = (index + k * stride) % n
            if candidate not in self.known_broken:
                try:
                    sample = load(candidate)
                except SampleError as e:
                    error = str(e.__cause__)
                    if isinstance(e.__cause__, LASTING_ERRORS):
                        self.known_broken[candidate] = error
                    if k == 0:
                        index_error = error
                    self.log.append(
                        {"index": candidate, "path": path_of(candidate), "error": error, "substituted": False}
                    )
                    continue
                if k > 0:
                    self.log.append(
                        {
                            "index": index,
                            "path": path_of(index),
                            "substituted": True,
                            "error": self.known_broken.get(index, index_error),
                        }
                    )
                return sample
            if k == 0:
                index_error = self.known_broken[index]
        raise SampleError(f"every one of the {n} samples failed to load; see .skipped", index)

    def mark(self) -> int:
        """A point in the log; `since` reports only what happened after it."""
        return self.log.mark()

    def since(self, mark: int) -> list[SkipRecord]:
        """Broken samples met after ``mark``, once each, with the substitutions made since."""
        return summarise_skips(self.log.records(since=mark))

    def clear(self) -> None:
        """Empty the log. Processes still remember which samples they found broken."""
        self.log.clear()
