"""Where a training loop's steps go: waiting for data, the copy to the device, the compute; and the article's rule that
reads the share spent waiting (section 3.4: over 30 %, the loader is the problem; under 10 %, the model is).

`LoaderReport` is what `labkit.workers.profiled_loader.ProfiledLoader` prints each epoch and what
`labkit.measure.step_profile` prints and draws; `DATA_BOUND` and `MODEL_BOUND` are the rule's two thresholds,
written here once for everything that reads a data share.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.core.plotting import pyplot

DATA_BOUND = 0.30  # article §3.4: above this share of the step waiting for data, the loader is the problem
MODEL_BOUND = 0.10  # below it, the loader keeps up: look at the model


def data_bound_diagnosis(data_share: float) -> str:
    """The article's rule of thumb, in words, for a share of step time spent waiting for data."""
    if data_share > DATA_BOUND:
        return (
            f"data-bound: {data_share:.0%} of each step waits for data (over {DATA_BOUND:.0%}); fix the "
            "loader first — explain_bottleneck() names the stage"
        )
    if data_share < MODEL_BOUND:
        return (
            f"compute-bound: only {data_share:.0%} of each step waits for data (under {MODEL_BOUND:.0%}); "
            "the loader keeps up — look at the model"
        )
    return (
        f"balanced: {data_share:.0%} of each step waits for data (between {MODEL_BOUND:.0%} and "
        f"{DATA_BOUND:.0%}); both sides matter"
    )


@dataclass
class LoaderReport:
    """Per-step wait / transfer / compute times of a loop, with the data-bound diagnosis (the article's rule)."""

    wait_s: list[float]
    transfer_s: list[float]
    compute_s: list[float]
    images: int
    has_model: bool

    @property
    def stages(self) -> list[tuple[str, list[float], str]]:
        """(label, seconds per step, colour) of each part of a step, in the order a step runs them."""
        return [
            ("wait for data", self.wait_s, "tab:red"),
            ("transfer", self.transfer_s, "tab:orange"),
            ("compute", self.compute_s, "tab:blue"),
        ]

    @property
    def step_s(self) -> list[float]:
        return [sum(parts) for parts in zip(*(values for _, values, _ in self.stages))]

    @property
    def data_share(self) -> float:
        """Share of the total time the loop spent waiting for data."""
        total = sum(self.step_s)
        return sum(self.wait_s) / total if total else 0.0

    @property
    def compute_share(self) -> float:
        """Share of the total time the model step ran: the device's busy share, where the step is timed on it (a
        synchronised GPU step, or `labkit.device.simulated_accelerator.SimulatedAccelerator`)."""
        total = sum(self.step_s)
        return sum(self.compute_s) / total if total else 0.0

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
        return (
            f"{len(self.wait_s)} steps, median ms: {parts}, step {med(self.step_s):.1f}; "
            f"{self.images_per_s:.1f} images/s\n{self.diagnosis}"
        )

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
