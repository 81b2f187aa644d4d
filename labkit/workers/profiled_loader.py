"""A loader that times its own epochs: how long the loop waited for each batch, and how long it spent on it.

What ``LABKIT_PROFILE=1`` wraps around `labkit.workers.loader_factory.make_loader`'s loader (the
article's section 8 "profile switch"): each epoch ends with its `labkit.workers.step_report.LoaderReport`, the share
of each step spent waiting for data read against the article's 30 % / 10 % rule.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

from labkit.core.environment import PROFILE_ENV
from labkit.core.pass_through import PassThrough
from labkit.core.timing import Stopwatch, timed
from labkit.workers.step_report import LoaderReport


def batch_length(batch: Any) -> int:
    """Samples in a batch: the length of its first field (images), or 1 for a batch that has none."""
    first = batch[0] if isinstance(batch, (list, tuple)) else batch
    return len(first) if hasattr(first, "__len__") else 1


class ProfiledLoader(PassThrough):
    """Wraps any loader; times how long the loop waits for each batch and how long it spends on it,
    and prints a `LoaderReport` when each epoch ends. What ``LABKIT_PROFILE=1`` switches on."""

    wraps = "loader"

    def __init__(self, loader: Iterable, stream: Any = None) -> None:
        self.loader, self.stream = loader, stream
        self.reports: list[LoaderReport] = []

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        wait, compute = [], []
        images = 0
        for waited, batch in timed(self.loader):
            wait.append(waited)
            images += batch_length(batch)
            handed = Stopwatch()
            yield batch
            compute.append(handed.elapsed)
        if wait and compute:
            report = LoaderReport(wait[: len(compute)], [0.0] * len(compute), compute, images, True)
            self.reports.append(report)
            print(f"[{PROFILE_ENV}] epoch {len(self.reports)}: {report}", file=self.stream or sys.stderr)
