"""The article's four-version ablation (section 5) on this machine, and the versions beyond it.

v1–v4 follow the article's code paths (files + PIL + Resize/ToTensor/Normalize in the worker,
then workers and pinning, then an mmap'd pack, then prefetch_factor=4 and MixUp in
collate); v5–v8 follow this kit's rules (uint8 across processes in reused shared memory,
normalise and mix on the device, decode less or not at all, let the autotuner choose, decode
on the GPU). Every
version ends with the same thing — a normalised float batch (MixUp'd from v4 on) on the
device — so their step times compare like for like. One run, one table, one plot; the
article's own numbers stand beside ours, and where its claims do not hold here, the notes say
so with the numbers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from tqdm.auto import tqdm

from labkit.collate.mixing import MixUp, mix_batch
from labkit.core.atomic import save_figure
from labkit.core.environment import usable_cpus
from labkit.core.errors import LabkitValueError
from labkit.core.machine import describe_machine, machine_info, os_name
from labkit.core.plotting import pyplot
from labkit.core.timing import Stopwatch, time_calls
from labkit.core.wording import clipped
from labkit.datasets.storage_kinds import DECODED_PACK, FOLDER
from labkit.decode.decoder_contract import OUTPUT_SIZE
from labkit.decode.registry import NO_DECODE, decoder_label
from labkit.device.simulated_accelerator import SimulatedAccelerator
from labkit.device.transfer import DevicePrefetcher, normalize_uint8
from labkit.diagnose.autotuner import Budget, LoaderConfig, autotune, default_budget
from labkit.harness.ablation_loaders import build_loader, device_batches, fastest_decoder, model_step
from labkit.harness.ablation_versions import (
    SEED_BATCH,
    SEED_MACHINE,
    TRAIN_OUTPUT_SIZE,
    TRAINING_VERSIONS,
    VERSIONS,
    AblationSettings,
    AblationVersion,
)
from labkit.harness.workspace import Workspace, shown_path
from labkit.measure.loader_timing import measure_loader
from labkit.measure.page_cache import empty_page_cache, mapping_processes, resident_share
from labkit.measure.process_memory import PeakMemory, describe_tree_memory, tree_cpu_seconds, tree_memory_measure
from labkit.measure.result_files import write_result
from labkit.measure.verdict import judge
from labkit.workers.thread_budget import torch_threads


@dataclass
class Result:
    id: str
    name: str
    images_per_s: float
    step_s: float
    runs_images_per_s: list[float]
    cpu_util: float
    #: main process + workers, shared pages once: PSS summed (`labkit.measure.process_memory.tree_memory_bytes`)
    peak_memory_mb: float
    gpu_busy: float | None
    seed_step_s: float | None
    loader: dict[str, Any] = field(default_factory=dict)
    speedup_vs_v1: float = 1.0
    cache: dict[str, Any] = field(default_factory=dict)  # share of the data cached at the start; cold: how emptied
    median_gap_s: float | None = None  # the median wait between batches; step_s is seconds per batch


def measure_version(
    version: AblationVersion,
    ws: Workspace,
    settings: AblationSettings,
    decoder: str,
    tuned: LoaderConfig | None = None,
    step: Callable[[Any], None] | None = None,
) -> Result:
    """Build, warm up and time one version: images/s and step time (medians), CPU use, peak memory (PSS of
    main + workers), GPU busy."""
    device = settings.resolved_device()
    files = _version_files(version, ws, tuned)
    if not settings.cold:  # a warm run too says how warm it was: a kernel short of memory may have dropped data
        cache: dict[str, Any] = {"resident_before": resident_share(files), "files": len(files)}
    else:
        how = empty_page_cache([ws.pack, ws.decoded_pack] + [os.path.join(ws.folder, p) for p in _folder_files(ws)])
        cache = {
            "emptied_by": how,
            "resident_before": resident_share(files),
            "files": len(files),
            # the kernel keeps every page a process maps: another reader of the same pack keeps it warm
            "mapped_by_other_processes": sorted(
                {p for f in files[:1] for p in mapping_processes(f) if p != os.getpid()}
            )
            if len(files) == 1
            else [],
        }
    loader, described = build_loader(version, ws, settings, decoder, tuned)
    batches = device_batches(version, loader, settings, len(ws.classes))
    peak = PeakMemory()
    busy = [0.0]

    def on_batch(batch: Any) -> None:
        if step is not None:
            stepping = Stopwatch()
            step(batch)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            busy[0] += stepping.elapsed
        elif device.type == "cuda":
            torch.cuda.synchronize(device)
        peak.sample()

    steps = min(settings.steps, max(1, len(loader)))
    cpu0, watch = tree_cpu_seconds(), Stopwatch()
    with torch_threads(described["main_threads"]):
        result = measure_loader(
            batches,
            runs=settings.runs,
            warmup_runs=1,
            max_batches=steps,
            on_batch=on_batch,
            warmup_batches=None if version.workers else 1,
            min_seconds=settings.min_seconds,
        )
    wall = watch.elapsed
    cpu_util = (tree_cpu_seconds() - cpu0) / (wall * usable_cpus())
    del batches, loader
    # the accelerator's busy share: the real GPU's where CUDA runs the model, the simulated one's where it stands in
    gpu_busy = busy[0] / wall if step is not None and (device.type == "cuda" or settings.accelerator) else None
    return Result(
        version.id,
        version.name,
        result.images_per_s,
        result.step_s,
        result.runs_images_per_s,
        cpu_util,
        peak.peak / 2**20,
        gpu_busy,
        version.seed_step_s,
        described,
        cache=cache,
        median_gap_s=result.median_gap_s,
    )


def _version_files(version: AblationVersion, ws: Workspace, tuned: LoaderConfig | None) -> list[str]:
    """The files a version reads its samples from (a cold run reports how much of them is cached)."""
    if version.storage == FOLDER:
        return [os.path.join(ws.folder, p) for p in _folder_files(ws)]
    if version.storage == DECODED_PACK or (tuned is not None and tuned.decoder == NO_DECODE):
        return [ws.decoded_pack]
    return [ws.pack]


def _cached_share(result: Result) -> str:
    share = result.cache["resident_before"]  # None where the OS cannot say (results saved before: -1.0)
    text = (
        f"{result.id} {share:.1%}"
        if share is not None and share >= 0
        else f"{result.id} not known (page-cache residency not available on {os_name()})"
    )
    mapped = result.cache.get("mapped_by_other_processes")
    return text + (f" (mapped by process {', '.join(map(str, mapped))}, which keeps it cached)" if mapped else "")


def cold_note(results: list[Result]) -> str:
    """A cold run's line: how the page cache was emptied and what share of each version's data stayed cached."""
    hows = sorted({r.cache["emptied_by"] for r in results if "emptied_by" in r.cache})
    shares = ", ".join(_cached_share(r) for r in results if "resident_before" in r.cache)
    return (
        f"cold run: before each version the page cache was emptied: {'; '.join(hows) or 'nothing measured'}; "
        f"share of the version's data still cached when it started: {shares}"
    )


def warm_note(results: list[Result]) -> str:
    """A warm run's line: what share of each version's data was in the page cache when it started."""
    shares = ", ".join(_cached_share(r) for r in results if "resident_before" in r.cache)
    return (
        "warm run: files stay in the page cache between versions (--cold drops them); share of the version's "
        f"data cached when it started: {shares or 'not measured'}"
    )


def _folder_files(ws: Workspace) -> list[str]:
    from labkit.storage.image_folder import scan_image_folder

    return list(scan_image_folder(ws.folder).relpaths)


def device_stage_ms(
    settings: AblationSettings, classes: int, fused: bool, repeats: int = 5, size: int = OUTPUT_SIZE
) -> float:
    """What normalising and mixing one uint8 batch costs on the device: as two passes into fresh
    tensors (``fused=False``, the textbook way), or as v5+ do it — `MixUp` folded into the
    normalisation, written into reused buffers (``fused=True``). Cheap on a GPU, not on a CPU."""
    device = settings.resolved_device()
    images = torch.randint(0, 256, (settings.batch_size, 3, size, size), dtype=torch.uint8, device=device)
    labels = torch.arange(settings.batch_size, device=device) % classes
    if fused:  # on CUDA the prefetcher works a batch ahead: its first step pays for two batches
        stage = iter(DevicePrefetcher([(images, labels)] * (repeats + 1), device, mix=MixUp(classes)))
    else:
        stage = (mix_batch(normalize_uint8(images), labels, classes) for _ in range(repeats + 1))

    def step() -> None:
        next(stage)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    step()  # the first step also allocates (and, fused, fills the prefetcher): not timed
    return time_calls(step, repeats).median * 1000


def _step_verdicts(results: list[Result], pairs: Sequence[tuple[str, str]], seed_sizes: bool) -> list[str]:
    """Each later version of ``pairs`` judged against the earlier one from their repeated runs, with the article's
    size where ``seed_sizes``; a pair with a version not measured is left out."""
    by_id = {r.id: r for r in results}
    notes = []
    for before, after in pairs:
        if before not in by_id or after not in by_id:
            continue
        a, b = by_id[before], by_id[after]
        per_step = f"{a.step_s:.3f} s -> {b.step_s:.3f} s per step"
        if min(len(a.runs_images_per_s), len(b.runs_images_per_s)) < 2:
            notes.append(f"{after} vs {before}: {per_step}, from one run each: no verdict (measure --runs 2 or more)")
            continue
        size = a.seed_step_s / b.seed_step_s if seed_sizes and a.seed_step_s and b.seed_step_s else None
        verdict = judge(f"{after} faster than {before}", a.runs_images_per_s, b.runs_images_per_s, size=size)
        notes.append(f"{per_step}. {verdict}")
    return notes


def seed_notes(results: list[Result]) -> list[str]:
    """Each claim of the article's table — every version faster than the one before, by the article's factor —
    judged here from the versions' repeated runs (`labkit.measure.verdict.judge`)."""
    return _step_verdicts(results, (("v1", "v2"), ("v2", "v3"), ("v3", "v4")), seed_sizes=True)


def training_notes(results: list[Result]) -> list[str]:
    """Each training step judged against the one before, and labkit's pipeline against the article's v1 and v2 with
    the crop (the article gives no training sizes, so these verdicts have none)."""
    return _step_verdicts(
        results, (("t1", "t2"), ("t2", "t3"), ("t3", "t5"), ("t2", "t5"), ("t1", "t5")), seed_sizes=False
    )


def budget_note(results: list[Result], budget: Budget) -> str:
    """Whether every version's peak memory (main process + workers) stayed inside the autotuner's RAM budget."""
    measure = tree_memory_measure()
    over = [f"{r.id} {r.peak_memory_mb:.0f} MiB" for r in results if r.peak_memory_mb * 2**20 > budget.ram_bytes]
    worst = max(results, key=lambda r: r.peak_memory_mb, default=None)
    if worst is None:
        return f"autotuner's memory budget here: {budget}"
    if over:
        return f"peak {measure} over the autotuner's RAM budget ({budget}): {', '.join(over)}"
    return (
        f"peak {measure} of every version within the autotuner's budget ({budget}): the largest, {worst.id}, "
        f"{worst.peak_memory_mb:.0f} MiB"
    )


def format_table(
    results: list[Result], skipped: dict[str, str], info: dict[str, Any], header: str, notes: list[str]
) -> str:
    lines = [
        f"Machine: {describe_machine(info)}",
        header,
        "",
        f"{'id':<4}{'version':<64}{'step s':>8}{'images/s':>10}{'vs ' + (results[0].id if results else 'v1'):>8}"
        f"{'article s':>10}{'article x':>10}"
        f"{'CPU %':>7}{tree_memory_measure() + ' MiB':>9}",
    ]
    lines.append("-" * len(lines[-1]))
    seed_v1 = VERSIONS[0].seed_step_s
    for r in results:
        seed = f"{r.seed_step_s:>10.2f}{seed_v1 / r.seed_step_s:>9.2f}x" if r.seed_step_s else f"{'':>20}"
        lines.append(
            f"{r.id:<4}{clipped(r.name, 63):<64}{r.step_s:>8.3f}{r.images_per_s:>10.1f}{r.speedup_vs_v1:>7.2f}x"
            f"{seed}{r.cpu_util * 100:>7.0f}{r.peak_memory_mb:>9.0f}"
        )
    for vid, why in skipped.items():
        lines.append(f"{vid:<4}not run: {why}")
    lines.append("")
    lines.append(
        "step s: seconds per batch (the batch size ÷ images/s), as the article counts a step; the median gap "
        "between two batches, a shorter figure where workers run ahead, is the JSON's median_gap_s."
    )
    lines.append(f"article s / article x: {SEED_MACHINE}.")
    lines.append(f"{tree_memory_measure()} MiB: peak {describe_tree_memory()}.")
    made = [r for r in results if r.loader.get("call", "").startswith("make_loader")]
    if made:
        lines.append("labkit's versions are this make_loader call (labkit.workers.loader_factory) over their dataset:")
        lines.extend(f"  {r.id}: {r.loader['call']}" for r in made)
    lines.extend(f"note: {n}" for n in notes)
    return "\n".join(lines)


def plot(results: list[Result], path: str, title: str) -> None:
    """Bar chart of images/s per version from 0, the article's v1–v4 beside ours, each of ours labelled with its
    speed-up over v1."""
    plt = pyplot(headless=True)
    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(results))
    ax.bar([x - 0.2 for x in xs], [r.images_per_s for r in results], width=0.4, label="here", color="tab:blue")
    seed = [(x, SEED_BATCH / r.seed_step_s) for x, r in zip(xs, results) if r.seed_step_s]
    ax.bar([x + 0.2 for x, _ in seed], [v for _, v in seed], width=0.4, label="the article", color="tab:gray")
    for x, r in zip(xs, results):
        ax.annotate(f"{r.speedup_vs_v1:.1f}x", (x - 0.2, r.images_per_s), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [r.id for r in results])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("images/s")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def run_ablation(
    ws: Workspace,
    settings: AblationSettings,
    only: list[str] | None = None,
    json_path: str | None = None,
    plot_path: str | None = None,
    progress: bool = True,
    train: bool = False,
) -> dict[str, Any]:
    """Measure every version that applies here, print the table, write JSON and plot if asked.
    ``train``: the training versions (`TRAINING_VERSIONS`, RandomResizedCrop(224) + flip) instead."""
    device = settings.resolved_device()
    info = machine_info()
    budget = default_budget()
    versions = TRAINING_VERSIONS if train else VERSIONS
    unknown = sorted(set(only or ()) - {v.id for v in versions})
    if unknown:
        raise LabkitValueError(
            f"no version {', '.join(unknown)} in the {'training' if train else 'evaluation'} "
            f"ablation; its versions: {', '.join(v.id for v in versions)}"
        )
    chosen = [v for v in versions if not only or v.id in only]
    # The decoders are timed where a version picks one by speed, and for t5, whose gain their times bound; the
    # device stage where a version normalises on the device. A run of other versions skips both.
    decoders_timed = train or any(v.decoder in ("fastest", "tuned") for v in chosen)
    fastest, decode_times = fastest_decoder(ws, crops=train) if decoders_timed else (None, {})
    step = None
    if settings.model:
        step = (
            SimulatedAccelerator(settings.accelerator, device)
            if settings.accelerator
            else model_step(device, len(ws.classes))
        )
    results: list[Result] = []
    skipped: dict[str, str] = {}
    tuned: LoaderConfig | None = None
    tuned_note = ""
    bar = tqdm(chosen, desc="ablation", unit="version", disable=not progress)
    for version in bar:
        bar.set_postfix_str(version.id)
        if version.cuda_only and device.type != "cuda":
            skipped[version.id] = "needs a CUDA device"
            continue
        if version.decoder == "tuned":
            tune = autotune(
                ws.pack,
                ws.decoded_pack,
                batch_size=settings.batch_size,
                size=OUTPUT_SIZE,
                max_workers=max(2, usable_cpus()),
                batches=2,
                runs=1,
                decoders=[fastest],
                check_crc=False,
                min_seconds=settings.min_seconds / 3,
            )
            tuned = tune.best
            tuned_note = (
                f"v7 = autotune's choice after {len(tune.trials)} trials: decoder {decoder_label(tuned.decoder)}, "
                f"{tuned.num_workers} workers, prefetch_factor {tuned.prefetch_factor}, main threads "
                f"{tuned.main_threads or 'default'}, {tuned.sampler} batches"
            )
            if progress:
                bar.write(f"  {tuned_note}")
        decoder = fastest if version.decoder == "fastest" else version.decoder
        result = measure_version(version, ws, settings, decoder, tuned if version.decoder == "tuned" else None, step)
        results.append(result)
        if progress:
            bar.write(f"  {result.id}: {result.images_per_s:8.1f} images/s, step {result.step_s:.3f} s")
    first = versions[0].id
    base = next((r.images_per_s for r in results if r.id == first), results[0].images_per_s if results else 1.0)
    for r in results:
        r.speedup_vs_v1 = r.images_per_s / base
    judged = training_notes if train else seed_notes
    notes = judged(results) + ([tuned_note] if tuned_note else [])
    if decoders_timed:
        notes.append(
            "decoders timed on one core here (ms/image): "
            + ", ".join(f"{k} {v * 1000:.1f}" for k, v in decode_times.items())
            + (f"; t5 uses {fastest}, the fastest that crops inside its decode" if train else f"; v5 uses {fastest}")
        )
    if any(v.mix == "device" for v in chosen):
        size = versions[-1].output_size
        separate, fused = (device_stage_ms(settings, len(ws.classes), f, size=size) for f in (False, True))
        notes.append(
            f"device stage (normalise + MixUp of one uint8 batch on {device}, {torch.get_num_threads()} "
            f"threads): {separate:.1f} ms as two passes into fresh tensors, {fused:.1f} ms fused into "
            f"reused ones (v5 on); alone it caps those versions at "
            f"{settings.batch_size / fused * 1000:.0f} images/s"
            + (" — on a CPU-only machine the main process pays it" if device.type == "cpu" else "")
        )
    notes.append(budget_note(results, budget))
    notes.append(cold_note(results) if settings.cold else warm_note(results))
    if settings.model and settings.accelerator:
        mode = f"with a model step on {SimulatedAccelerator(settings.accelerator).label}"
    else:
        mode = "with a model step" if settings.model else "data only (as the article)"
    shape = f"RandomResizedCrop({TRAIN_OUTPUT_SIZE}) + flip" if train else f"{OUTPUT_SIZE}x{OUTPUT_SIZE}"
    header = (
        f"Data: {ws.count} images from {shown_path(ws.folder)} -> {shape}, batch "
        f"{settings.batch_size}, {settings.resolved_num_workers()} workers, {mode}, device {device}; median of "
        f"{settings.runs} runs of {settings.steps} steps after a warm-up run"
        + (f" (more runs, up to {settings.min_seconds:g} s, for fast versions)" if settings.min_seconds else "")
    )
    print()
    print(format_table(results, skipped, info, header, notes))
    report = {
        "machine": info,
        "settings": {
            **asdict(settings),
            "device": str(device),
            "images": ws.count,
            "folder": shown_path(ws.folder),
            "fastest_decoder": fastest,
        },
        "versions": [asdict(r) for r in results],
        "skipped": skipped,
        "notes": notes,
        "memory_budget": asdict(budget),
        "peak_memory": describe_tree_memory(),
        "seed": {"machine": SEED_MACHINE, "step_s": {v.id: v.seed_step_s for v in VERSIONS if v.seed_step_s}},
    }
    if json_path:
        write_result(json_path, report)
        print(f"wrote {json_path}")
    if plot_path and results:
        plot(results, plot_path, f"{describe_machine(info)} — {mode}")
        print(f"wrote {plot_path}")
    return report
