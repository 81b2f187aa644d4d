"""A loader that times its own epochs: how long the loop waited for each batch, and how long it spent on it.

What ``LABKIT_PROFILE=1`` wraps around `labkit.workers.loader_factory.make_loader`'s loader (the
seed's section 8 "profile switch"), and the report and verdict `labkit.measure.step_profile`
prints too: the share of each step spent waiting for data against the seed's 30 % / 10 % rule.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Tuple

import numpy as np

from labkit.core.environment import PROFILE_ENV
from labkit.core.pass_through import PassThrough
from labkit.core.plotting import pyplot
from labkit.core.timing import Stopwatch, timed

DATA_BOUND = 0.30  # seed 3.4: above this share of the step waiting for data, the loader is the problem
MODEL_BOUND = 0.10  # below it, the loader keeps up: look at the model


def batch_length(batch: Any) -> int:
    """Samples in a batch: the length of its first field (images), or 1 for a batch that has none."""
    first = batch[0] if isinstance(batch, (list, tuple)) else batch
    return len(first) if hasattr(first, "__len__") else 1


def data_bound_diagnosis(data_share: float) -> str:
    """The seed's rule of thumb, in words, for a share of step time spent waiting for data."""
    if data_share > DATA_BOUND:
        return (f"data-bound: {data_share:.0%} of each step waits for data (over {DATA_BOUND:.0%}); fix the "
                "loader first — explain_bottleneck() names the stage")
    if data_share < MODEL_BOUND:
        return (f"compute-bound: only {data_share:.0%} of each step waits for data (under {MODEL_BOUND:.0%}); "
                "the loader keeps up — look at the model")
    return (f"balanced: {data_share:.0%} of each step waits for data (between {MODEL_BOUND:.0%} and "
            f"{DATA_BOUND:.0%}); both sides matter")


@dataclass
class LoaderReport:
    """Per-step wait / transfer / compute times of a loop, with the data-bound diagnosis (the seed's rule)."""

    wait_s: List[float]
    transfer_s: List[float]
    compute_s: List[float]
    images: int
    has_model: bool

    @property
    def stages(self) -> List[Tuple[str, List[float], str]]:
        """(label, seconds per step, colour) of each part of a step, in the order a step runs them."""
        return [("wait for data", self.wait_s, "tab:red"), ("transfer", self.transfer_s, "tab:orange"),
                ("compute", self.compute_s, "tab:blue")]

    @property
    def step_s(self) -> List[float]:
        return [sum(parts) for parts in zip(*(values for _, values, _ in self.stages))]

    @property
    def data_share(self) -> float:
        """Share of the total time the loop spent waiting for data."""
        total = sum(self.step_s)
        return sum(self.wait_s) / total if total else 0.0

    @property
    def images_per_s(self) -> float:
        total = sum(self.step_s)
        return self.images / total if total else 0.0

    @property
    def diagnosis(self) -> str:
        if not self.has_model:
            return f"no model step given: this timed the loader alone ({self.images_per_s:.1f} images/s)"
        return data_bound_diagnosis(self.data_share)

    def __str__(self) -> str:
        med = lambda xs: statistics.median(xs) * 1000 if xs else 0.0  # noqa: E731
        parts = ", ".join(f"{label} {med(values):.1f}" for label, values, _ in self.stages)
        return (f"{len(self.wait_s)} steps, median ms: {parts}, step {med(self.step_s):.1f}; "
                f"{self.images_per_s:.1f} images/s\n{self.diagnosis}")

    def plot(self, ax: Any = None) -> Any:
        """Stacked bars, one per step, one colour per part of the step (ms)."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(8, 3))[1]
        steps = np.arange(len(self.wait_s))
        bottom = np.zeros(len(steps))
        for label, values, color in self.stages:
            ms = np.asarray(values) * 1000
            ax.bar(steps, ms, bottom=bottom, label=label, color=color)
            bottom += ms
        ax.set_xlabel("step")
        ax.set_ylabel("ms per step")
        ax.set_title(self.diagnosis.split(";")[0])
        ax.legend(loc="upper right")
        return ax


class ProfiledLoader(PassThrough):
    """Wraps any loader; times how long the loop waits for each batch and how long it spends on it,
    and prints a `LoaderReport` when each epoch ends. What ``LABKIT_PROFILE=1`` switches on."""

    wraps = "loader"

    def __init__(self, loader: Iterable, stream: Any = None) -> None:
        self.loader, self.stream = loader, stream
        self.reports: List[LoaderReport] = []

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
