"""What augmenting inside ``collate_fn`` costs in memory (article section 6.3), measured as peak RSS.

The article's case: samples reach collate as tensors and stay alive while the augmentation makes new tensors,
so for a while two (or more) versions of the batch exist at once. Three ways to make the same kind of batch:

* ``"uint8 stack"`` — collate only stacks uint8; conversion and augmentation happen later, on the device.
* ``"float steps"`` — the article's case: convert to float, normalise, flip, each step a new float tensor.
* ``"uint8 first, in place"`` — the article's advice: augment while the batch is still uint8, convert to float
  once, then normalise in place.

A peak is a high-water mark that never goes down, so each way runs in a fresh interpreter of its own
(the ``spawn`` start method: a forked child would inherit its parent's mark) and reports its peak above
the memory it held before collate ran. Only Linux can reset the mark after the imports; elsewhere a peak
hidden below an import's is not seen, so the figures are lower bounds there.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
from collections.abc import Sequence

import torch

from labkit.core.errors import LabkitRuntimeError, LabkitValueError
from labkit.measure.process_memory import peak_rss_bytes, reset_peak_rss, rss_bytes

WAYS = ("uint8 stack", "float steps", "uint8 first, in place")
_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def augment_in_collate(batch: Sequence[torch.Tensor], way: str) -> torch.Tensor:
    """``batch`` (uint8 C×H×W tensors) collated the named way (one of `WAYS`); the float ways flip every
    image horizontally and normalise with ImageNet's mean and std."""
    if way not in WAYS:
        raise LabkitValueError(f"way={way!r}: one of {', '.join(WAYS)}")
    stacked = torch.stack(list(batch))
    if way == "uint8 stack":
        return stacked
    if way == "float steps":
        x = stacked.float() / 255
        x = (x - _MEAN) / _STD
        return torch.flip(x, dims=[3])
    x = torch.flip(stacked, dims=[3]).float()  # the flip moves uint8, a quarter of the bytes
    return x.div_(255).sub_(_MEAN).div_(_STD)


def _measure(way: str, batch_size: int, size: tuple[int, int], results: multiprocessing.Queue) -> None:
    generator = torch.Generator().manual_seed(0)
    samples = [torch.randint(0, 256, (3, *size), dtype=torch.uint8, generator=generator) for _ in range(batch_size)]
    augment_in_collate(samples[:2], way)  # first-call allocations of the kernels, not the batch's
    if not reset_peak_rss():  # the mark may still hold an import's peak: count only what rises above both
        before = max(rss_bytes() or 0, peak_rss_bytes() or 0)
    else:
        before = rss_bytes()
    out = augment_in_collate(samples, way)
    peak = peak_rss_bytes()
    results.put(
        (way, None if peak is None or before is None else max(0, peak - before), out.numel() * out.element_size())
    )


def collate_peaks(
    batch_size: int = 64, size: tuple[int, int] = (256, 256), ways: Sequence[str] = WAYS, timeout_s: float = 120.0
) -> dict[str, tuple[int, int]]:
    """For each way: (peak bytes above what the process held before collate, bytes of the batch it returns),
    each measured in a fresh process. Raises if the OS keeps no peak (then nothing here can be measured)."""
    for way in ways:
        if way not in WAYS:
            raise LabkitValueError(f"way={way!r}: one of {', '.join(WAYS)}")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=_measure, args=(way, batch_size, tuple(size), results), daemon=True) for way in ways
    ]
    for process in processes:
        process.start()
    found: dict[str, tuple[int, int]] = {}
    try:
        for _ in ways:
            way, peak, out_bytes = results.get(timeout=timeout_s)
            if peak is None:
                raise LabkitRuntimeError(
                    "this OS reports no peak memory for a process: the collate memory demo cannot measure here"
                )
            found[way] = (peak, out_bytes)
    except queue_module.Empty:
        missing = [way for way in ways if way not in found]
        raise LabkitRuntimeError(
            f"no peak from {missing} within {timeout_s:.0f} s: a child process failed or "
            "the machine is overloaded; rerun, or raise timeout_s"
        ) from None
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return {way: found[way] for way in ways}


def batch_bytes(batch_size: int, size: tuple[int, int], dtype: torch.dtype) -> int:
    """Bytes of one batch of 3-channel images of ``size`` in ``dtype``."""
    return batch_size * 3 * size[0] * size[1] * torch.empty((), dtype=dtype).element_size()
