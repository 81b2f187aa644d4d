"""Timing a loader the way every labkit measurement does: warm-up, several passes cut from one stream of epochs,
the median and the passes behind it (for `labkit.measure.verdict.judge`), on the clock of
`labkit.core.timing` — so two numbers are only compared when measured side by side."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from labkit.core.errors import LabkitValueError
from labkit.core.timing import Stopwatch
from labkit.workers.profiled_loader import batch_length


def spread_indices(count: int, samples: int) -> list[int]:
    """``samples`` indices spread evenly over a set of ``count``, for timing a sample of it.

    Not the first ``samples``: packs and folders are stored class by class, and classes differ
    in how long they take to decode (in labkit's photo set the first class's files are 5 %
    smaller than the average and decode faster).
    """
    if count < 1 or samples < 1:
        raise LabkitValueError(f"need count >= 1 and samples >= 1, got count={count}, samples={samples}")
    n = min(count, samples)
    return [i * count // n for i in range(n)]


@dataclass
class Throughput:
    """What a loader delivers, from ``runs`` measured passes.

    ``images_per_s`` is the median of the passes' rates; ``step_s`` is the one meaning of "step" everywhere in the
    kit, seconds per batch: the images of a batch (their mean over the passes) ÷ ``images_per_s``.
    ``median_gap_s`` is the median wait between two batches, a different figure: with workers ahead of the loop
    most batches are waiting already and the gaps are short, while a few are long, so it reads well below
    ``step_s``.
    """

    images_per_s: float
    step_s: float
    runs_images_per_s: list[float] = field(default_factory=list)
    batches_per_run: int = 0
    median_gap_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_NO_BATCH = "the loader produced no batch; is the dataset empty or drop_last too strict?"


def _stream(loader: Iterable) -> Iterator[Any]:
    """The loader's batches epoch after epoch, one iterator per epoch, never abandoned mid-epoch."""
    while True:
        produced = False
        for batch in loader:
            produced = True
            yield batch
        if not produced:
            raise LabkitValueError(_NO_BATCH)


def prefetched_batches(loader: Any) -> int:
    """Batches a DataLoader's workers make before the first is asked for (``num_workers ×
    prefetch_factor``; a producer thread's ``prefetch_factor``), found through wrappers that keep the DataLoader as
    ``.loader``; 0 without workers."""
    for _ in range(4):
        ahead = getattr(loader, "batches_ahead", None)  # a producer thread's (`labkit.workers.batches_ahead`)
        if isinstance(ahead, int):
            return ahead
        workers = getattr(loader, "num_workers", None)
        if isinstance(workers, int) and workers > 0:
            return workers * (getattr(loader, "prefetch_factor", None) or 2)
        loader = getattr(loader, "loader", None)
        if loader is None:
            break
    return 0


def measure_loader(
    loader: Iterable,
    runs: int = 3,
    warmup_runs: int = 1,
    max_batches: int | None = None,
    on_batch: Callable[[Any], None] | None = None,
    warmup_batches: int | None = None,
    min_seconds: float = 0.0,
    max_runs: int | None = None,
) -> Throughput:
    """Time ``warmup_runs + runs`` consecutive passes of at most ``max_batches`` batches (default: an epoch).

    Warm-up passes absorb worker start-up and cold caches and are not counted; each measured
    pass gives images/s, and every batch one gap: the wait for the batch plus ``on_batch(batch)`` — a model
    step, or a memory sample — when one is given (`Throughput` says what a step is). Warm-up runs
    stop after ``warmup_batches`` batches (default: as many as a measured run).

    Passes are cut from one continuing stream of epochs: restarting a DataLoader's iterator
    mid-epoch makes its workers finish, and throw away, every batch already in flight —
    up to ``num_workers × prefetch_factor`` batches of work charged to the next pass.

    A warm-up pass takes at least the batches the workers made before the first was asked for
    (`prefetched_batches`): otherwise a short first measured pass is handed batches made before
    it began, and a trial of a few batches reads several times faster than the loader runs.

    A fast loader's pass can last a fraction of a second, short enough for one hiccup of a
    shared machine to move its median: with ``min_seconds``, measured passes go on past
    ``runs`` until they add up to that long (at most ``max_runs``, default 5 × ``runs``).
    """
    if runs < 1:
        raise LabkitValueError(f"runs must be >= 1, got {runs}")
    most = max(runs, 5 * runs if max_runs is None else max_runs)
    if max_batches is None and hasattr(loader, "__len__"):
        max_batches = len(loader)  # type: ignore[arg-type]
    rates: list[float] = []
    gaps: list[float] = []
    batches = 0
    images_measured = batches_measured = 0
    stream = _stream(loader)
    measured = 0.0
    run = 0
    try:
        while run < warmup_runs + runs or (measured < min_seconds and run < warmup_runs + most):
            limit = warmup_batches if (run < warmup_runs and warmup_batches is not None) else max_batches
            if run < warmup_runs and limit is not None:
                limit = max(limit, prefetched_batches(loader) + 1)
            images = 0
            batches = 0
            watch = Stopwatch()
            run_gaps: list[float] = []
            for batch in stream if limit is not None else loader:  # no length, no limit: whole epochs
                if on_batch is not None:
                    on_batch(batch)
                run_gaps.append(watch.lap())
                images += batch_length(batch)
                batches += 1
                if limit is not None and batches >= limit:
                    break
            elapsed = watch.elapsed
            if batches == 0:
                raise LabkitValueError(_NO_BATCH)
            if run >= warmup_runs:
                rates.append(images / elapsed)
                gaps.extend(run_gaps)
                measured += elapsed
                images_measured, batches_measured = images_measured + images, batches_measured + batches
            run += 1
    finally:
        stream.close()
    images_per_s = statistics.median(rates)
    return Throughput(
        images_per_s, images_measured / batches_measured / images_per_s, rates, batches, statistics.median(gaps)
    )


@dataclass
class EpochTime:
    """One epoch of a loader: how long until its first batch arrived, and how long it took in all."""

    first_batch_s: float
    total_s: float
    batches: int


def time_epochs(loader: Iterable, epochs: int = 3) -> list[EpochTime]:
    """Iterate ``epochs`` whole epochs and time each: the wait for the first batch is where worker
    start-up shows (paid every epoch unless ``persistent_workers=True``, seed 3.1)."""
    if epochs < 1:
        raise LabkitValueError(f"epochs must be >= 1, got {epochs}")
    times: list[EpochTime] = []
    for _ in range(epochs):
        watch = Stopwatch()
        first: float | None = None
        batches = 0
        for _batch in loader:
            if first is None:
                first = watch.elapsed
            batches += 1
        if first is None:
            raise LabkitValueError(_NO_BATCH)
        times.append(EpochTime(first, watch.elapsed, batches))
    return times
