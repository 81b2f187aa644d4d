"""Which stage limits a loader, and what would speed it up for this dataset (article sections 6.4, 7).

* `explain_bottleneck` — times each stage of one batch in isolation (read, decode, transform,
  collate, worker → main copy, pin, device copy), scales the worker-side stages by the number of
  workers, and names the stage that limits the loader with what would speed it up for this
  dataset — not what it already does (a decoder it uses, workers on every CPU).
* `find_slow_samples` — per-sample ``__getitem__`` times, slowest first, with their paths.
* `record_timeline` — which worker produced which batch, when; and when the loop got it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from labkit.collate.batching import stack_uint8
from labkit.core.cpus import cpu_budget
from labkit.core.environment import usable_cpus
from labkit.core.errors import LabkitTypeError
from labkit.core.plotting import pyplot
from labkit.core.shared_log import SharedLog
from labkit.core.timing import Passes, Stopwatch, time_calls, timestamp
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.fetch_log import FetchLoggedDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset
from labkit.decode.decoder_contract import MAX_PIXELS
from labkit.measure.decoder_speed import time_decoders

_CLEARLY_FASTER = 0.9  # a decoder is advised only if it took under 90 % of the time: closer is within timing noise
_OVERLAP_COPY = (
    "overlap the copy with compute: labkit.device.transfer.DevicePrefetcher copies the next pinned batch on a "
    "side stream while the model works on this one"
)
_WORKER_STAGES = ("read", "decode", "transform", "collate", "worker→main copy")


@dataclass
class StageTime:
    name: str
    per_batch_s: float
    in_workers: bool

    def effective_s(self, workers: int) -> float:
        """Time per batch this stage costs the pipeline, with workers sharing worker-side stages."""
        return self.per_batch_s / max(1, workers) if self.in_workers else self.per_batch_s


@dataclass
class BottleneckReport:
    """Each stage of one batch timed alone, the slowest named with its knob."""

    stages: list[StageTime]
    batch_size: int
    workers: int
    skipped: dict[str, str] = field(default_factory=dict)
    advice: str = ""  # what would speed up the slowest stage of this dataset with these settings

    @property
    def slowest(self) -> StageTime:
        return max(self.stages, key=lambda s: s.effective_s(self.workers))

    @property
    def bound_images_per_s(self) -> float:
        """Most images/s this pipeline can give: worker stages run in parallel, main-side stages do not."""
        worker = sum(s.per_batch_s for s in self.stages if s.in_workers) / max(1, self.workers)
        main = sum(s.per_batch_s for s in self.stages if not s.in_workers)
        return self.batch_size / max(worker, main, 1e-9)

    def __str__(self) -> str:
        lines = [
            f"one batch of {self.batch_size}, {self.workers} workers sharing the worker-side stages:",
            f"  {'stage':<18}{'ms/batch':>10}{'where':>9}{'ms/batch with workers':>24}",
        ]
        for s in self.stages:
            lines.append(
                f"  {s.name:<18}{s.per_batch_s * 1000:>10.2f}{'workers' if s.in_workers else 'main':>9}"
                f"{s.effective_s(self.workers) * 1000:>24.2f}"
            )
        for name, why in self.skipped.items():
            lines.append(f"  {name:<18}{'—':>10}   not timed: {why}")
        slow = self.slowest
        lines.append(f"slowest: {slow.name} -> {self.advice}")
        lines.append(f"bound: about {self.bound_images_per_s:.0f} images/s from this pipeline")
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Horizontal bars of each stage's cost per batch, with workers sharing worker stages."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(7, 3))[1]
        names = [s.name for s in self.stages]
        values = [s.effective_s(self.workers) * 1000 for s in self.stages]
        colors = ["tab:red" if s is self.slowest else "tab:gray" for s in self.stages]
        ax.barh(names, values, color=colors)
        ax.invert_yaxis()
        ax.set_xlabel(f"ms per batch of {self.batch_size} ({self.workers} workers)")
        ax.set_title(f"slowest: {self.slowest.name}")
        return ax


def share_memory_seconds(tensors: list[torch.Tensor], repeats: int) -> float:
    """Moving a batch into shared memory (the median of ``repeats`` moves of fresh copies): what a worker pays to
    hand a batch to the main process, and what the main process never pays without workers."""
    times = []
    for _ in range(repeats):
        copies = [t.clone() for t in tensors]
        watch = Stopwatch()
        for t in copies:
            t.share_memory_()
        times.append(watch.elapsed)
    return Passes(tuple(times)).median


def explain_bottleneck(
    dataset: Dataset,
    batch_size: int = 64,
    collate_fn: Callable = stack_uint8,
    num_workers: int | None = None,
    device: torch.device | None = None,
    repeats: int = 3,
    seed: int = 0,
) -> BottleneckReport:
    """Time every stage of one batch in isolation and name the one that limits the loader.

    The dataset must expose ``read_raw`` and ``decode_raw`` (labkit's datasets do) so read
    and decode can be timed apart. Pinning and the device copy are timed where CUDA exists.
    """
    if not (hasattr(dataset, "read_raw") and hasattr(dataset, "decode_raw")):
        raise LabkitTypeError(
            f"{type(dataset).__name__} has no read_raw/decode_raw; use a labkit dataset, or "
            "time it as a whole with find_slow_samples"
        )
    workers = cpu_budget(main_process_steps=False).workers_per_rank if num_workers is None else num_workers
    rng = np.random.default_rng(seed)
    indices = rng.choice(len(dataset), size=min(batch_size, len(dataset)), replace=False).tolist()
    raw = [dataset.read_raw(i) for i in indices]
    images = [dataset.decode_raw(r) for r in raw]
    transform = getattr(dataset, "transform", None)
    samples = [((transform(img) if transform else img), int(dataset.labels[i])) for img, i in zip(images, indices)]
    batch = collate_fn(samples)
    tensors = [t for t in (batch if isinstance(batch, (list, tuple)) else [batch]) if isinstance(t, torch.Tensor)]

    stages = [
        StageTime("read", time_calls(lambda: [dataset.read_raw(i) for i in indices], repeats).median, True),
        StageTime("decode", time_calls(lambda: [dataset.decode_raw(r) for r in raw], repeats).median, True),
        StageTime(
            "transform",
            time_calls(lambda: [transform(img) for img in images], repeats).median if transform else 0.0,
            True,
        ),
        StageTime("collate", time_calls(lambda: collate_fn(samples), repeats).median, True),
        StageTime("worker→main copy", share_memory_seconds(tensors, repeats), True),
    ]
    skipped: dict[str, str] = {}
    device = (
        torch.device(device) if device is not None else (torch.device("cuda") if torch.cuda.is_available() else None)
    )
    if device is not None and device.type == "cuda":
        stages.append(StageTime("pin", time_calls(lambda: [t.pin_memory() for t in tensors], repeats).median, False))
        pinned = [t.pin_memory() for t in tensors]

        def copy() -> None:
            for t in pinned:
                t.to(device, non_blocking=True)
            torch.cuda.synchronize(device)

        copy()
        stages.append(StageTime("device copy", time_calls(copy, repeats).median, False))
    else:
        skipped["pin"] = skipped["device copy"] = "no CUDA device here"
    report = BottleneckReport(stages, len(indices), workers, skipped)
    slowest = report.slowest.name
    decoder_s = _decoder_times(dataset, raw, repeats) if slowest == "decode" else {}
    report.advice = advise(slowest, dataset, collate_fn, tensors, workers, usable_cpus(), decoder_s)
    return report


def _decoder_times(dataset: Dataset, raw: list[Any], repeats: int) -> dict[str, float]:
    """Seconds per batch for every decoder on the same bytes, for a dataset that decodes files."""
    if not (isinstance(getattr(dataset, "decoder", None), str) and raw and isinstance(raw[0], bytes)):
        return {}
    size, max_pixels = getattr(dataset, "size", None), getattr(dataset, "max_pixels", MAX_PIXELS)
    return {name: seconds * len(raw) for name, seconds in time_decoders(raw, size, max_pixels, repeats).items()}


def advise(
    stage: str,
    dataset: Dataset,
    collate_fn: Callable,
    tensors: Sequence[torch.Tensor],
    workers: int,
    cpus: int,
    decoder_s: dict[str, float] | None = None,
) -> str:
    """What would make ``stage`` cheaper for this dataset and these settings — only what it does not do
    already (``decoder_s``: seconds per batch measured for each decoder, to name only faster ones)
    — or a plain statement that the stage is at its best here."""
    options: list[str] = []
    if stage == "read":
        if isinstance(dataset, ImageFolderDataset):
            options.append("pack the files into one file (labkit pack): one mmap instead of a file open per image")
        options.append("keep the data on local disk and leave it room in the page cache")
    elif stage == "decode":
        current = getattr(dataset, "decoder", None)
        if decoder_s and current in decoder_s:
            faster = sorted((t, name) for name, t in decoder_s.items() if t < decoder_s[current] * _CLEARLY_FASTER)
            if faster:
                options.append(
                    "decoder="
                    + " or ".join(f"{name!r} ({t * 1000:.0f} ms a batch)" for t, name in faster)
                    + f" instead of {current!r} ({decoder_s[current] * 1000:.0f} ms), every decoder timed side by "
                    "side on this batch's bytes (a pass of its own: its figure for the current decoder is not the "
                    "stage table's)"
                )
        if not isinstance(dataset, DecodedArrayDataset):
            options.append("a decoded pack (labkit pack --decoded N, read with DecodedArrayDataset): no decode at all")
    elif stage == "transform":
        options.append("make the transforms cheaper, or move them to the device after the copy")
    elif stage == "collate" and collate_fn is not stack_uint8:
        options.append("collate with labkit.collate.batching.stack_uint8 (uint8, straight into one tensor)")
    elif stage in ("worker→main copy", "pin", "device copy"):
        if any(t.is_floating_point() for t in tensors):
            options.append("hand over uint8 batches and convert on the device: 4x fewer bytes than float32")
        if stage == "worker→main copy":
            options.append(
                "reuse shared-memory batch slots instead of a fresh segment per batch "
                "(labkit.workers.shared_slots.SlotLoader)"
            )
        if stage == "device copy":
            options.append(_OVERLAP_COPY)
    if stage in _WORKER_STAGES and workers < cpus:
        options.append(f"more workers ({workers} now, {cpus} CPUs)")
    if options:
        return "; ".join(options)
    if stage in _WORKER_STAGES:
        return (
            f"{stage} is already at its best with these settings ({workers} workers on {cpus} CPUs); "
            "the remaining levers are fewer pixels per sample or more CPUs"
        )
    return f"{stage} is already at its best with these settings: the batch is uint8 and already pinned"


@dataclass
class SlowSampleReport:
    """``__getitem__`` time of every sample looked at; the slowest first, with their paths."""

    indices: list[int]
    seconds: list[float]
    paths: list[str | None]

    def slowest(self, top: int = 10) -> list[tuple]:
        order = np.argsort(self.seconds)[::-1][:top]
        return [(self.indices[k], self.seconds[k], self.paths[k]) for k in order]

    def __str__(self) -> str:
        s = np.asarray(self.seconds) * 1000
        lines = [
            f"{len(s)} samples: median {np.median(s):.2f} ms, p95 {np.percentile(s, 95):.2f} ms, "
            f"max {s.max():.2f} ms; slowest:"
        ]
        for index, seconds, path in self.slowest():
            lines.append(f"  {seconds * 1000:9.2f} ms  sample {index}  {path or ''}")
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Histogram of per-sample times (log scale): a long right tail is the stutter of seed 6.4."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(6, 3))[1]
        ax.hist(np.asarray(self.seconds) * 1000, bins=40, log=True)
        ax.set_xlabel("ms per sample")
        ax.set_ylabel("samples")
        return ax


def find_slow_samples(
    dataset: Dataset, indices: Sequence[int] | None = None, progress: bool = True
) -> SlowSampleReport:
    """Time ``dataset[i]`` for each index (all by default) in this process."""
    from tqdm.auto import tqdm

    indices = list(range(len(dataset))) if indices is None else [int(i) for i in indices]  # type: ignore[arg-type]
    seconds = []
    for i in tqdm(indices, desc="timing samples", unit=" samples", disable=not progress):
        watch = Stopwatch()
        dataset[i]
        seconds.append(watch.elapsed)
    path_of = getattr(dataset, "sample_path", None)
    return SlowSampleReport(indices, seconds, [path_of(i) if path_of else None for i in indices])


@dataclass
class Timeline:
    """When each worker fetched each batch, and when the main loop received it (monotonic seconds)."""

    fetches: list[dict[str, Any]]
    received: list[float]
    start: float

    @property
    def span(self) -> float:
        """Seconds from the start until the loop received its last batch."""
        return max(self.received) - self.start if self.received else 0.0

    def busy_share(self, worker: int) -> float:
        """Share of `span` that ``worker`` spent fetching. Fetches still running after the loop's last
        batch (prefetching that nobody will receive) count only up to it."""
        end = self.start + self.span
        busy = sum(
            max(0.0, min(f["end"], end) - max(f["start"], self.start)) for f in self.fetches if f["worker"] == worker
        )
        return busy / self.span if self.span else 0.0

    def __str__(self) -> str:
        lines = [f"{len(self.received)} batches in {self.span:.2f} s"]
        for worker in sorted({f["worker"] for f in self.fetches}):
            count = sum(f["worker"] == worker for f in self.fetches)
            lines.append(f"  worker {worker}: {count} batches, busy {self.busy_share(worker):.0%} of the time")
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """One lane per worker with a bar per batch fetched; ticks on the top lane when the loop got one."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(9, 2.5))[1]
        workers = sorted({f["worker"] for f in self.fetches})
        for lane, worker in enumerate(workers):
            bars = [(f["start"] - self.start, f["end"] - f["start"]) for f in self.fetches if f["worker"] == worker]
            ax.broken_barh(bars, (lane - 0.4, 0.8), facecolors=f"C{lane % 10}", edgecolor="white")
        top = len(workers)
        ax.scatter(
            [t - self.start for t in self.received], [top] * len(self.received), marker="|", s=200, color="black"
        )
        ax.set_yticks(list(range(top + 1)), [f"worker {w}" for w in workers] + ["main loop"])
        ax.set_xlabel("seconds")
        return ax


def record_timeline(dataset: Dataset, batches: int = 20, **loader_kwargs: Any) -> Timeline:
    """Iterate ``batches`` batches of ``DataLoader(dataset, **loader_kwargs)`` and record who did what when."""
    log = SharedLog("labkit-timeline-")
    loader = DataLoader(FetchLoggedDataset(dataset, log), **loader_kwargs)
    start = timestamp()
    received = []
    for k, _ in enumerate(loader):
        received.append(timestamp())
        if k + 1 >= batches:
            break
    del loader
    fetches = [
        {
            "worker": r["worker"],
            "pid": r["pid"],
            "first": r["indices"][0],
            "size": len(r["indices"]),
            "start": r["start"],
            "end": r["time"],
        }
        for r in log.records()
        if r["event"] == "end"
    ]
    return Timeline(fetches, received, start)
