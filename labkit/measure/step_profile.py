"""Where the time of a training step goes, before anyone changes a knob (article sections 3.4, 7, 8).

`profile_loader` times each step of a loop: waiting for data, host → device transfer, compute;
the share of the step spent waiting, and the article's verdict (> 30 % waiting: fix the loader;
< 10 %: look at the model). Given a `labkit.device.transfer.DevicePrefetcher`, it keeps the article's
fetch / transfer split visible: iterated as it is, the prefetcher copies and converts each batch
inside the loop's ``next()``, so the copy would be folded into the wait and the transfer column
would read zero; instead the profile times the prefetcher's loader (fetch), its host → device copy
(transfer) and its on-device conversion (convert) one after the other (`PrefetcherReport`).
`labkit.workers.profiled_loader.ProfiledLoader` is the same report switched on by ``LABKIT_PROFILE=1``;
`labkit.diagnose.bottleneck` says which stage limits the loader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from labkit.core.errors import LabkitValueError
from labkit.core.timing import Stopwatch, timed
from labkit.device.transfer import DevicePrefetcher, to_device
from labkit.workers.profiled_loader import batch_length
from labkit.workers.step_report import LoaderReport


def _sync(device: torch.device | None) -> None:
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

    convert_s: list[float] = field(default_factory=list)

    @property
    def stages(self) -> list[tuple[str, list[float], str]]:
        return [
            ("wait for data (fetch)", self.wait_s, "tab:red"),
            ("transfer", self.transfer_s, "tab:orange"),
            ("convert on the device", self.convert_s, "tab:purple"),
            ("compute", self.compute_s, "tab:blue"),
        ]

    @property
    def device_stage_share(self) -> float:
        """Share of the total time spent copying batches to the device and converting them there."""
        total = sum(self.step_s)
        return (sum(self.transfer_s) + sum(self.convert_s)) / total if total else 0.0


def profile_loader(
    loader: Iterable,
    steps: int = 20,
    model_step: Callable[[Any], Any] | None = None,
    device: torch.device | None = None,
    warmup: int = 2,
    split_device_stage: bool = True,
) -> LoaderReport:
    """Run ``warmup + steps`` steps of a loop over ``loader`` and time each part of each step.

    ``model_step(batch)`` is your forward/backward (the batch is already on ``device``); on
    CUDA the device is synchronised around each part, so the times are real, not launch times.

    A `DevicePrefetcher` is profiled stage by stage (a `PrefetcherReport`): its loader's batch (fetch), the copy to
    its device (transfer), its conversion there (convert), each timed alone and synchronised, so on CUDA the
    prefetcher's overlap of the next copy with this step's compute is not in these figures (time the loop itself
    for that). ``split_device_stage=False`` iterates it as it is: the copy and conversion then count as waiting.
    """
    convert: Callable[[Any], Any] | None = None
    if isinstance(loader, DevicePrefetcher) and split_device_stage:
        # already on the device when prepared: its own copy is a no-op, the conversion is not
        loader, device, convert = loader.loader, loader.device, loader.prepare
    device = torch.device(device) if device is not None else None
    parts: list[Callable[[Any], Any]] = [
        lambda batch: to_device(batch, device, non_blocking=False) if device is not None else batch
    ]
    if convert is not None:
        parts.append(convert)
    if model_step is not None:
        parts.append(lambda batch: (model_step(batch), batch)[1])
    wait: list[float] = []
    seconds: list[list[float]] = [[] for _ in parts]
    images = 0
    for k, (waited, batch) in enumerate(timed(loader)):
        if k >= warmup + steps:
            break
        watch = Stopwatch()
        laps = []
        for part in parts:
            batch = part(batch)
            _sync(device)
            laps.append(watch.lap())
        if k >= warmup:
            wait.append(waited)
            for column, lap in zip(seconds, laps):
                column.append(lap)
            images += batch_length(batch)
    if not wait:
        raise LabkitValueError(f"the loader ran out before the {warmup} warm-up steps were over; lower warmup")
    transfer = seconds[0]
    compute = seconds[-1] if model_step is not None else [0.0] * len(wait)
    if convert is not None:
        return PrefetcherReport(wait, transfer, compute, images, model_step is not None, seconds[1])
    return LoaderReport(wait, transfer, compute, images, model_step is not None)
