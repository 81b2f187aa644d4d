"""Pick decoder, num_workers, prefetch_factor, batch layout and main-process threads by measuring, under a
memory budget.

PyTorch has no autotuner; tf.data's AUTOTUNE is the peer, and its users meet out-of-memory kills because it optimises
speed alone. This one treats memory as a constraint first: a configuration whose in-flight batches would not fit half of
/dev/shm is not even tried, and one whose measured peak memory goes over the RAM budget is rejected: the PSS of the main
process and its workers summed (`labkit.measure.process_memory.tree_memory_bytes`), so that the pages they share (the
parent's heap, the mmap'd pack) count once, not once per worker as summed RSS would. For each decoder it adds workers
one at a time and stops as soon as one more worker buys less than ``min_gain`` (starting from none — every core's thread
decoding in the main process, a producer thread ahead — for the decoders whose record says they release the GIL); then
it tries a deeper prefetch on the best worker count, and the main process's thread count and the batch layout (random
batches, or locality-aware ones from `labkit.samplers.block_shuffle.BlockShuffleSampler`) on the winner. What it
measures is the whole pipeline up to the device: the loader, then normalisation and MixUp
(`labkit.device.transfer.DevicePrefetcher`).

The search (`search`) takes any ``measure(config) -> (images/s, peak memory bytes)``, so it can be
tested on a cost model; `autotune` plugs in real loaders over a pack, each built by `make_loader`, so
``make_loader(dataset, **result.loader_kwargs)`` is the loader the winning trial measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from labkit.collate.mixing import MixUp
from labkit.core.cpus import cpu_budget
from labkit.core.errors import LabkitRuntimeError
from labkit.core.machine import describe_machine, machine_info, memory_facts
from labkit.datasets.pack_datasets import PackedDataset
from labkit.datasets.storage_kinds import DECODED_PACK, PACK, open_images
from labkit.decode.decoder_contract import OUTPUT_SIZE
from labkit.decode.registry import DECODERS, NO_DECODE, decoder_label
from labkit.device.transfer import DevicePrefetcher
from labkit.diagnose.doctor import shm_batches
from labkit.measure.loader_timing import measure_loader
from labkit.measure.process_memory import PeakMemory, tree_memory_measure
from labkit.measure.result_files import write_result
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.workers.loader_factory import make_loader
from labkit.workers.thread_budget import torch_threads


@dataclass(frozen=True)
class LoaderConfig:
    decoder: str  # a labkit decoder name, or NO_DECODE for a decoded pack
    num_workers: int  # 0: no worker processes; the main process's threads decode, prefetch_factor batches ahead
    prefetch_factor: int = 2
    main_threads: int = 0  # torch threads in the main process; 0: leave torch's default
    sampler: str = "random"  # batch layout: "random", or "block" (BlockShuffleSampler: batched reads stay local)

    def loader_kwargs(self, samples: int, batch_size: int) -> dict[str, Any]:
        """`make_loader`'s arguments for this configuration, over a dataset of ``samples`` samples."""
        kwargs: dict[str, Any] = dict(
            batch_size=batch_size, num_workers=self.num_workers, prefetch_factor=self.prefetch_factor
        )
        if self.sampler == "block":
            kwargs["sampler"] = BlockShuffleSampler.for_batches(samples, batch_size)
        return kwargs

    def make_loader_call(self, dataset: str, batch_size: int) -> str:
        """The `make_loader` call this configuration is, as code (``dataset``: how the call names the dataset)."""
        sampler = (
            f", sampler=BlockShuffleSampler.for_batches(len({dataset}), {batch_size})"
            if self.sampler == "block"
            else ""
        )
        return (
            f"make_loader({dataset}, batch_size={batch_size}, num_workers={self.num_workers}, "
            f"prefetch_factor={self.prefetch_factor}{sampler})"
        )


@dataclass(frozen=True)
class Budget:
    ram_bytes: int
    shm_bytes: int

    def __str__(self) -> str:
        return f"RAM {self.ram_bytes / 2**30:.1f} GiB, /dev/shm {self.shm_bytes / 2**30:.1f} GiB"


def default_budget(fraction: float = 0.5) -> Budget:
    """``fraction`` of the RAM available now and of /dev/shm free now (doctor's readings); of RAM for both
    where the OS has no /dev/shm (or it reports no size)."""
    facts = memory_facts()
    shm = facts.shm_free if facts.shm_total and facts.shm_free is not None else facts.ram_available
    return Budget(int(facts.ram_available * fraction), int(shm * fraction))


@dataclass
class Trial:
    config: LoaderConfig
    images_per_s: float = 0.0
    peak_memory: int = 0  # bytes, main process + workers (TuneResult.memory_measure says which figure)
    in_flight: int = 0
    decision: str = "measured"  # or why it was rejected, or "chosen"


@dataclass
class TuneResult:
    best: LoaderConfig
    best_images_per_s: float
    budget: Budget
    trials: list[Trial] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    memory_measure: str = "PSS"  # what peak_memory sums: PSS, or USS / RSS where the OS gives no PSS
    batch_size: int = 64  # of the trials
    samples: int = 0  # in the dataset the trials read

    @property
    def loader_kwargs(self) -> dict[str, Any]:
        """``make_loader(dataset, **result.loader_kwargs)`` is the loader the winning trial measured (the dataset
        opened with ``best.decoder``, or the decoded pack for NO_DECODE; ``best.main_threads`` is
        ``torch.set_num_threads``'s, where not 0)."""
        return self.best.loader_kwargs(self.samples, self.batch_size)

    def __str__(self) -> str:
        lines = [
            f"{'decoder':<22}{'num_workers':>12}{'decodes in':>14}{'prefetch_factor':>16}{'main threads':>13}"
            f"{'batches':>8}{'images/s':>10}{f'peak {self.memory_measure} MiB':>14}  decision"
        ]
        for t in self.trials:
            threads = t.config.main_threads or "default"
            if t.config.decoder == NO_DECODE:
                where = "-"
            else:
                where = "workers" if t.config.num_workers else "main threads"
            lines.append(
                f"{decoder_label(t.config.decoder):<22}{t.config.num_workers:>12}{where:>14}"
                f"{t.config.prefetch_factor:>16}{threads:>13}{t.config.sampler:>8}{t.images_per_s:>10.1f}"
                f"{t.peak_memory / 2**20:>14.0f}  {t.decision}"
            )
        b = self.best
        if b.num_workers:
            loader = f"num_workers={b.num_workers}"
        else:
            work = "reads" if b.decoder == NO_DECODE else "decodes with a thread per core"
            loader = f"no worker processes (the main process {work}, a producer thread ahead)"
        lines.append(
            f"decision: decoder={decoder_label(b.decoder)}, {loader}, prefetch_factor={b.prefetch_factor}, main "
            f"threads={b.main_threads or 'default'}, {b.sampler} batches -> {self.best_images_per_s:.1f} "
            f"images/s, within the budget ({self.budget})"
        )
        lines.append(f"the loader it measured: {b.make_loader_call('dataset', self.batch_size)}")
        if self.machine:
            lines.insert(0, f"Machine: {describe_machine(self.machine)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "budget": asdict(self.budget),
            "best": asdict(self.best),
            "best_images_per_s": self.best_images_per_s,
            "memory_measure": self.memory_measure,
            "trials": [
                {
                    **asdict(t.config),
                    "images_per_s": t.images_per_s,
                    "peak_memory": t.peak_memory,
                    "in_flight": t.in_flight,
                    "decision": t.decision,
                }
                for t in self.trials
            ],
        }


Measure = Callable[[LoaderConfig], tuple[float, int]]


def search(
    measure: Measure,
    decoders: Sequence[str],
    max_workers: int,
    budget: Budget,
    batch_bytes: int,
    prefetches: Sequence[int] = (2, 4),
    min_gain: float = 0.05,
    main_threads: Sequence[int] = (),
    samplers: Sequence[str] = (),
    threaded: Sequence[str] = (),
) -> TuneResult:
    """Grow workers per decoder until it stops paying, then deepen prefetch; stay inside ``budget``.

    The decoders in ``threaded`` (and NO_DECODE) start from no worker processes at all.

    ``main_threads`` lists torch thread counts to try for the main process on the winner:
    with busy workers fewer threads leave them cores; with idle workers more threads speed
    up the main process's own work (on a CPU-only machine, normalising and mixing).
    ``samplers`` lists batch layouts to try on the winner after that ("block").
    A configuration is skipped unmeasured when the /dev/shm it would hold at its peak
    (`labkit.diagnose.doctor.shm_batches` batches) is over the budget.
    """
    trials: list[Trial] = []

    def attempt(config: LoaderConfig) -> Trial | None:
        trial = Trial(config, in_flight=shm_batches(config.num_workers, config.prefetch_factor) * batch_bytes)
        trials.append(trial)
        if trial.in_flight > budget.shm_bytes:
            trial.decision = f"skipped: {trial.in_flight / 2**20:.0f} MiB in flight > shm budget"
            return None
        trial.images_per_s, trial.peak_memory = measure(config)
        if trial.peak_memory > budget.ram_bytes:
            trial.decision = f"rejected: {trial.peak_memory / 2**20:.0f} MiB > RAM budget"
            return None
        return trial

    accepted: list[Trial] = []
    for decoder in decoders:
        best: Trial | None = None
        for workers in range(0 if decoder == NO_DECODE or decoder in threaded else 1, max_workers + 1):
            trial = attempt(LoaderConfig(decoder, workers, prefetches[0]))
            if trial is None:
                break
            accepted.append(trial)
            if best is not None and trial.images_per_s < best.images_per_s * (1 + min_gain):
                trial.decision = f"stop: +1 worker gained < {min_gain:.0%}"
                break
            best = trial
        if best is not None and best.config.num_workers:
            for prefetch in prefetches[1:]:
                trial = attempt(LoaderConfig(decoder, best.config.num_workers, prefetch))
                if trial is not None:
                    accepted.append(trial)
    if not accepted:
        raise LabkitRuntimeError(
            f"no configuration fits the memory budget ({budget}); lower the batch size or free memory"
        )
    for knob, values in (("main_threads", main_threads), ("sampler", samplers)):  # one at a time, on the leader
        leader = max(accepted, key=lambda t: t.images_per_s).config
        for value in values:
            if value != getattr(leader, knob):
                trial = attempt(replace(leader, **{knob: value}))
                if trial is not None:
                    accepted.append(trial)
    winner = max(accepted, key=lambda t: t.images_per_s)
    winner.decision = "chosen"
    return TuneResult(winner.config, winner.images_per_s, budget, trials)


def _pipeline(
    pack: str, decoded_pack: str | None, config: LoaderConfig, batch_size: int, size: int, classes: int, check_crc: bool
) -> Iterable:
    """What training consumes: the loader, then normalisation and MixUp on the device (`DevicePrefetcher`)."""
    decoded = config.decoder == NO_DECODE
    dataset = open_images(
        DECODED_PACK if decoded else PACK,
        decoded_pack if decoded else pack,  # type: ignore[arg-type]
        None if decoded else config.decoder,
        size,
        check_crc=check_crc,
    )
    loader = make_loader(dataset, **config.loader_kwargs(len(dataset), batch_size))
    return DevicePrefetcher(loader, mix=MixUp(classes))


def autotune(
    pack: str,
    decoded_pack: str | None = None,
    batch_size: int = 64,
    size: int = OUTPUT_SIZE,
    max_workers: int | None = None,
    budget: Budget | None = None,
    batches: int = 4,
    runs: int = 2,
    decoders: Sequence[str] | None = None,
    check_crc: bool = True,
    min_seconds: float = 0.0,
) -> TuneResult:
    """Measure real pipelines over ``pack`` (and ``decoded_pack`` if given) and pick the fastest that fits.

    ``check_crc=False`` reads without checking each sample's checksum, for packs that
    ``labkit verify`` has just checked whole. ``min_seconds``: measure each trial over more
    runs until they add up to this long (`labkit.measure.loader_timing.measure_loader`), so that a fast
    trial's few milliseconds do not let one hiccup of the machine pick the winner.
    """
    budget = budget or default_budget()
    cpus = cpu_budget().share  # this rank's CPUs: under torchrun the node's are shared by its ranks
    max_workers = max_workers or max(2, cpus)
    names = list(decoders or DECODERS) + ([NO_DECODE] if decoded_pack else [])
    classes = len(PackedDataset(pack).classes)

    def measure(config: LoaderConfig) -> tuple[float, int]:
        peak = PeakMemory()
        with torch_threads(config.main_threads):
            pipeline = _pipeline(pack, decoded_pack, config, batch_size, size, classes, check_crc)
            result = measure_loader(
                pipeline, runs=runs, warmup_runs=1, max_batches=batches, on_batch=peak.sample, min_seconds=min_seconds
            )
        del pipeline
        return result.images_per_s, peak.peak

    threads = sorted({1, cpus} - {torch.get_num_threads()})
    result = search(
        measure,
        names,
        max_workers,
        budget,
        batch_size * 3 * size * size,
        main_threads=threads,
        samplers=["block"],
        threaded=[n for n in names if n in DECODERS and DECODERS[n].releases_gil],
    )
    result.machine, result.memory_measure = machine_info(), tree_memory_measure()
    result.batch_size, result.samples = batch_size, len(PackedDataset(pack))
    return result


def save_result(result: TuneResult, path: str) -> None:
    """``result`` as JSON in ``path``, written whole."""
    write_result(path, result.to_dict())
