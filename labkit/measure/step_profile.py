"""Where the time of a training step goes, before anyone changes a knob (seed sections 3.4, 7, 8).

`profile_loader` times each step of a loop: waiting for data, host → device transfer, compute;
the share of the step spent waiting, and the seed's verdict (> 30 % waiting: fix the loader;
< 10 %: look at the model). Given a `labkit.device.transfer.DevicePrefetcher`, it keeps the seed's
fetch / transfer split visible: iterated as it is, the prefetcher copies and converts each batch
inside the loop's ``next()``, so the copy would be folded into the wait and the transfer column
would read zero; instead the profile times the prefetcher's loader (fetch), its host → device copy
(transfer) and its on-device conversion (convert) one after the other (`PrefetcherReport`).
`labkit.workers.profiled_loader.ProfiledLoader` is the same report switched on by ``LABKIT_PROFILE=1``;
`labkit.diagnose.bottleneck` says which stage limits the loader.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, List, Optional

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.plotting import pyplot
from labkit.device.transfer import DevicePrefetcher, to_device
from labkit.workers.profiled_loader import LoaderReport, batch_length, timed_batches


def _sync(device: Optional[torch.device]) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class PrefetcherReport(LoaderReport):
    """A `LoaderReport` of a loop over a `DevicePrefetcher`, its device stage split out.

    ``wait_s`` is the wait for the prefetcher's own loader alone (fetch), ``transfer_s`` the host → device copy,
    ``convert_s`` the prefetcher's work on the device (uint8 → normalised float, mixing). ``data_share`` stays the
    share spent waiting for the loader, as without a prefetcher; ``device_stage_share`` is the copy's and the
    conversion's.
    """

    convert_s: List[float] = field(default_factory=list)

    @property
    def step_s(self) -> List[float]:
        return [w + t + v + c for w, t, v, c in zip(self.wait_s, self.transfer_s, self.convert_s, self.compute_s)]

    @property
    def device_stage_share(self) -> float:
        """Share of the total time spent copying batches to the device and converting them there."""
        total = sum(self.step_s)
        return (sum(self.transfer_s) + sum(self.convert_s)) / total if total else 0.0

    def __str__(self) -> str:
        med = lambda xs: statistics.median(xs) * 1000 if xs else 0.0  # noqa: E731
        return (f"{len(self.wait_s)} steps, median ms: wait for data (fetch) {med(self.wait_s):.1f}, transfer "
                f"{med(self.transfer_s):.1f}, convert on the device {med(self.convert_s):.1f}, compute "
                f"{med(self.compute_s):.1f}, step {med(self.step_s):.1f}; {self.images_per_s:.1f} images/s\n"
                f"{self.verdict}")

    def plot(self, ax: Any = None) -> Any:
        """Stacked bars, one per step: fetch, transfer, convert, compute (ms)."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(8, 3))[1]
        steps = list(range(len(self.wait_s)))
        bottom = [0.0] * len(steps)
        for label, values, color in (("wait for data (fetch)", self.wait_s, "tab:red"),
                                     ("host→device", self.transfer_s, "tab:orange"),
                                     ("convert on the device", self.convert_s, "tab:purple"),
                                     ("compute", self.compute_s, "tab:blue")):
            ms = [1000 * v for v in values]
            ax.bar(steps, ms, bottom=bottom, label=label, color=color)
            bottom = [b + m for b, m in zip(bottom, ms)]
        ax.set_xlabel("step")
        ax.set_ylabel("ms")
        ax.set_title(self.verdict.split(";")[0])
        ax.legend(loc="upper right")
        return ax


def profile_loader(loader: Iterable, steps: int = 20, model_step: Optional[Callable[[Any], Any]] = None,
                   device: Optional[torch.device] = None, warmup: int = 2,
                   split_device_stage: bool = True) -> LoaderReport:
    """Run ``warmup + steps`` steps of a loop over ``loader`` and time each part of each step.

    ``model_step(batch)`` is your forward/backward (the batch is already on ``device``); on
    CUDA the device is synchronised around each part, so the times are real, not launch times.

    A `DevicePrefetcher` is profiled stage by stage (a `PrefetcherReport`): its loader's batch (fetch), the copy to
    its device (transfer), its conversion there (convert), each timed alone and synchronised, so on CUDA the
    prefetcher's overlap of the next copy with this step's compute is not in these figures (time the loop itself
    for that). ``split_device_stage=False`` iterates it as it is: the copy and conversion then count as waiting.
    """
    if isinstance(loader, DevicePrefetcher) and split_device_stage:
        return _profile_prefetcher(loader, steps, model_step, warmup)
    device = torch.device(device) if device is not None else None
    wait, transfer, compute = [], [], []
    images = 0
    for k, (waited, batch) in enumerate(timed_batches(loader)):
        if k >= warmup + steps:
            break
        t1 = time.perf_counter()
        if device is not None:
            batch = to_device(batch, device, non_blocking=False)
            _sync(device)
        t2 = time.perf_counter()
        if model_step is not None:
            model_step(batch)
            _sync(device)
        t3 = time.perf_counter()
        if k >= warmup:
            wait.append(waited)
            transfer.append(t2 - t1)
            compute.append(t3 - t2)
            images += batch_length(batch)
    if not wait:
        raise LabkitValueError(f"the loader ran out before the {warmup} warm-up steps were over; lower warmup")
    return LoaderReport(wait, transfer, compute, images, model_step is not None)


def _profile_prefetcher(prefetcher: DevicePrefetcher, steps: int, model_step: Optional[Callable[[Any], Any]],
                        warmup: int) -> PrefetcherReport:
    """`profile_loader` over a `DevicePrefetcher`, its three stages run and timed one after the other."""
    device = prefetcher.device
    fetch, transfer, convert, compute = [], [], [], []
    images = 0
    for k, (waited, batch) in enumerate(timed_batches(prefetcher.loader)):
        if k >= warmup + steps:
            break
        t1 = time.perf_counter()
        batch = to_device(batch, device, non_blocking=False)
        _sync(device)
        t2 = time.perf_counter()
        batch = prefetcher.prepare(batch)  # already on the device: its own copy is a no-op, the conversion is not
        _sync(device)
        t3 = time.perf_counter()
        if model_step is not None:
            model_step(batch)
            _sync(device)
        t4 = time.perf_counter()
        if k >= warmup:
            fetch.append(waited)
            transfer.append(t2 - t1)
            convert.append(t3 - t2)
            compute.append(t4 - t3)
            images += batch_length(batch)
    if not fetch:
        raise LabkitValueError(f"the loader ran out before the {warmup} warm-up steps were over; lower warmup")
    return PrefetcherReport(fetch, transfer, compute, images, model_step is not None, convert)
