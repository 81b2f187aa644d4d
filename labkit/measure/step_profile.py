"""Where the time of a training step goes, before anyone changes a knob (seed sections 3.4, 7, 8).

`profile_loader` times each step of a loop: waiting for data, host → device transfer, compute;
the share of the step spent waiting, and the seed's verdict (> 30 % waiting: fix the loader;
< 10 %: look at the model). `labkit.workers.profiled_loader.ProfiledLoader` is the same report
switched on by ``LABKIT_PROFILE=1``; `labkit.diagnose.bottleneck` says which stage limits the loader.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Optional

import torch

from labkit.core.errors import LabkitValueError
from labkit.device.transfer import to_device
from labkit.workers.profiled_loader import LoaderReport, batch_length, timed_batches


def _sync(device: Optional[torch.device]) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_loader(loader: Iterable, steps: int = 20, model_step: Optional[Callable[[Any], Any]] = None,
                   device: Optional[torch.device] = None, warmup: int = 2) -> LoaderReport:
    """Run ``warmup + steps`` steps of a loop over ``loader`` and time each part of each step.

    ``model_step(batch)`` is your forward/backward (the batch is already on ``device``); on
    CUDA the device is synchronised around each part, so the times are real, not launch times.
    """
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
