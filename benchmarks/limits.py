#!/usr/bin/env python3
"""The physical bound on this machine, and how close each version gets to it, measured in one run.

* decode bound: each decoder's single-core rate (read + decode + resize to 256x256, one
  process, one thread) x the usable cores — no loader can decode faster than that;
* copy bound: single-core memory-copy bandwidth over the bytes each pre-decoded image is
  copied (mmap -> batch, batch -> shared memory) x the cores;
* parallel decode: ``cores`` bare processes decoding at once, no loader — what the cores give
  together, which on a VM or a laptop can be well under cores x one core;
* a worker's stacking cost: a batch collated into fresh shared memory (as every DataLoader
  worker does) against the same stack into reused memory;
* then v1, v5 and v6 of the ablation, in the same process, each as a fraction of its bound;
* the crop-decode bound (``--only crops``, or with the rest): at both sizes the training loaders are measured at
  (the kit's 800x600 photos and the 160x120 set of ``train_pipeline.py --small``), the bare crop path of the
  loader's decoder (the pack's bytes and each box ready beforehand: decode at the box's DCT scale, cut, resize to
  224, flip; no loader, no batch, no draw) on one core x the usable cores, bracketed as above around
  `make_loader`'s training loaders over the same pack (plain, and with ``batch_slots=True``: reused shared memory);
  the faster one's fraction of it, against the goal of 80 %; and
  2.5x the tutorial's loader (``ImageFolder`` + ``v2.RandomResizedCrop`` in a DataLoader) set beside the bound, to
  say whether that goal can be reached at all on these images.

A shared or virtual machine's speed drifts by tens of percent from minute to minute, so each
version is bracketed by measurements of its bound taken just before and just after it, and its
fraction is taken against their mean; ``--rounds`` rounds, medians over rounds reported.

    python benchmarks/limits.py                    # data/photos, made if missing
    python benchmarks/limits.py --only crops --rounds 3    # the crop-decode bound at both sizes, ~5 minutes
    LABKIT_QUICK=1 python benchmarks/limits.py --rounds 2    # 256 images
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Sequence
from statistics import median
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from labkit.core.environment import quick_mode, usable_cpus
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import Stopwatch, time_calls
from labkit.datasets.pack_datasets import PackedDataset
from labkit.decode.pil_crop import displayed_hw
from labkit.decode.pil_decoders import open_image
from labkit.decode.random_crop import RandomResizedCrop, decode_box
from labkit.decode.registry import DECODERS, decode_image
from labkit.harness.ablation import measure_version
from labkit.harness.ablation_versions import VERSIONS, AblationSettings
from labkit.harness.synthetic_data import make_photos
from labkit.harness.workspace import OUTPUT_SIZE, data_root, prepare
from labkit.measure.loader_timing import spread_indices
from labkit.measure.result_files import result_path, write_result
from labkit.measure.verdict import goal_outcome
from labkit.storage.pack_format import PackReader
from labkit.workers.loader_factory import make_loader
from labkit.workers.thread_budget import torch_threads

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import timed_run  # noqa: E402  (the benchmarks share one timing loop)
from train_pipeline import BATCH, ENGINE, OUT, SMALL, torchvision_loader  # noqa: E402  (the training loaders' setup)

#: The least fraction of the crop-decode bound the training loader is to reach.
CROP_BOUND_GOAL = 0.8
#: The tutorial-baseline multiple the training loaders aim at (``train_pipeline.py``'s goal).
BASELINE_GOAL = 2.5


def single_core_rates(pack: str, samples: int, repeats: int = 3, decoders: Sequence[str] = DECODERS) -> dict:
    """images/s of each decoder on one core: read from the pack, decode, resize.

    The median of ``repeats`` passes, the same statistic as the versions' images/s, so the
    fraction compares like with like; the best pass is kept too (``best``).
    """
    reader = PackReader(pack)
    indices = spread_indices(len(reader), samples)
    rates, best = {}, {}
    for name in decoders:
        passes = time_calls(
            lambda name=name: [decode_image(reader.read(i), OUTPUT_SIZE, name) for i in indices], repeats, warmup=1
        )
        rates[name], best[name] = len(indices) / passes.median, len(indices) / passes.best
    return {"median": rates, "best": best}


def copy_bandwidth(decoded_pack: str, repeats: int = 5) -> float:
    """Single-core bytes/s copying a batch of decoded images out of the page-cached mmap (median pass)."""
    reader = PackReader(decoded_pack, check_crc=False)
    n = min(64, len(reader))
    nbytes = reader.read_decoded(range(n)).nbytes
    return nbytes / time_calls(lambda: reader.read_decoded(range(n)), repeats).median


class _StackTimer(Dataset):
    """One item, computed inside a DataLoader worker: the median ms to collate ``batch_size`` uint8
    images as a worker does (``default_collate`` into a fresh shared-memory segment) and to stack
    them into one reused tensor."""

    def __init__(self, batch_size: int, repeats: int) -> None:
        self.batch_size, self.repeats = batch_size, repeats

    def __len__(self) -> int:
        return 1

    def __getitem__(self, _: int) -> torch.Tensor:
        images = [
            torch.randint(0, 256, (3, OUTPUT_SIZE, OUTPUT_SIZE), dtype=torch.uint8) for _ in range(self.batch_size)
        ]
        reused = torch.empty((self.batch_size, *images[0].shape), dtype=torch.uint8)
        ms = []
        for stack in (lambda: default_collate(images), lambda: torch.stack(images, out=reused)):
            ms.append(time_calls(stack, self.repeats, warmup=1).median * 1000)
        return torch.tensor(ms)


def worker_stack_ms(batch_size: int, repeats: int = 10) -> dict:
    """ms a DataLoader worker spends stacking one batch into fresh shared memory, and what the same
    stack costs into reused memory: the difference is page allocation, paid on every batch."""
    fresh, reused = next(iter(DataLoader(_StackTimer(batch_size, repeats), batch_size=None, num_workers=1))).tolist()
    return {"fresh_shared_memory": fresh, "reused_memory": reused}


def _decode_all(pack: str, decoder: str, indices: Sequence[int], barrier: Any, results: Any) -> None:
    torch.set_num_threads(1)
    reader = PackReader(pack)
    decode_image(reader.read(indices[0]), OUTPUT_SIZE, decoder)  # imports and first-call costs before the clock
    barrier.wait()
    watch = Stopwatch()
    for i in indices:
        decode_image(reader.read(i), OUTPUT_SIZE, decoder)
    results.put(watch.elapsed)


def parallel_decode_rate(pack: str, decoder: str, processes: int, samples: int) -> float:
    """images/s of ``processes`` bare processes decoding at once, started together, no loader at all:
    what the cores really give when they all work (shared caches, memory, clock limits)."""
    ctx = mp.get_context()
    barrier, results = ctx.Barrier(processes, timeout=120), ctx.Queue()
    indices = spread_indices(len(PackReader(pack)), samples)
    procs = [
        ctx.Process(target=_decode_all, args=(pack, decoder, indices, barrier, results), daemon=True)
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"parallel decode: {len(failed)} of {processes} processes failed (exit codes {failed})")
    return processes * len(indices) / max(results.get(timeout=10) for _ in procs)


def _bound(version_id: str, ws, cores: int, samples: int) -> dict:
    """One measurement of a version's bound, on one thread: v1's is pil on one core, v5's every
    decoder on every core (the fastest counts), v6's two copies of each image on every core."""
    with torch_threads(1):
        if version_id == "v6":
            rate = copy_bandwidth(ws.decoded_pack) / (2 * 3 * OUTPUT_SIZE * OUTPUT_SIZE) * cores
            return {"median": {"copy": rate}, "best": {"copy": rate}}
        decoders, scale = (("pil",), 1) if version_id == "v1" else (DECODERS, cores)
        rates = single_core_rates(ws.pack, samples, decoders=decoders)
    return {kind: {name: rate * scale for name, rate in by_decoder.items()} for kind, by_decoder in rates.items()}


BOUND_TEXT = {
    "v1": "pil on 1 core (no workers)",
    "v5": "the fastest decoder ({decoder}) x {cores} cores",
    "v6": "2 copies of {kb:.0f} KB per image x {cores} cores",
}


def measure_round(ws, settings: AblationSettings, cores: int, samples: int) -> dict:
    """One round: every decoder's single-core rate, then v1, v5 and v6, each bracketed by
    measurements of its bound just before and just after it, so that the fraction compares rates
    taken at the same time even while the machine's speed drifts (the bound is the mean of the two)."""
    with torch_threads(1):
        measured, bandwidth = single_core_rates(ws.pack, samples), copy_bandwidth(ws.decoded_pack)
    rates = measured["median"]
    fastest = max(rates, key=rates.get)
    together = parallel_decode_rate(ws.pack, fastest, cores, samples)
    stack_ms = worker_stack_ms(settings.batch_size)
    rows = {}
    for version in VERSIONS:
        if version.id not in BOUND_TEXT:
            continue
        decoder = fastest if version.decoder == "fastest" else version.decoder
        before = _bound(version.id, ws, cores, samples)
        rate = measure_version(version, ws, settings, decoder).images_per_s
        after = _bound(version.id, ws, cores, samples)
        means = {name: (before["median"][name] + after["median"][name]) / 2 for name in before["median"]}
        top = max(means, key=means.get)
        best = max(max(before["best"].values()), max(after["best"].values()))
        rows[version.id] = {
            "images_per_s": rate,
            "bound_images_per_s": means[top],
            "fraction": rate / means[top],
            "fraction_of_best_pass_bound": rate / best,
            "bound_before_after": [before, after],
            "bound": BOUND_TEXT[version.id].format(decoder=top, cores=cores, kb=3 * OUTPUT_SIZE * OUTPUT_SIZE / 1e3),
            "decoder": decoder,
        }
    if "v5" in rows:
        rows["v5"]["fraction_of_parallel_decode"] = rows["v5"]["images_per_s"] / together
    return {
        "single_core_images_per_s": rates,
        "single_core_best_pass": measured["best"],
        "parallel_decode_images_per_s": together,
        "parallel_decode_vs_bound": together / (rates[fastest] * cores),
        "copy_bytes_per_s": bandwidth,
        "worker_stack_ms": stack_ms,
        "versions": rows,
    }


def one_core_rate(pack: str, samples: int, step: Callable[[int, bytes], Any], repeats: int = 3) -> float:
    """images/s of ``step(k, bytes)`` over ``samples`` images of ``pack`` read beforehand (``k``: the image's place
    among them), on one thread: the median of ``repeats`` passes."""
    blobs = sample_bytes(pack, samples)
    with torch_threads(1):
        passes = time_calls(lambda: [step(k, data) for k, data in enumerate(blobs)], repeats, warmup=1)
    return len(blobs) / passes.median


def sample_bytes(pack: str, samples: int) -> list[bytes]:
    """The encoded bytes of ``samples`` images spread over ``pack``."""
    reader = PackReader(pack)
    return [reader.read(i) for i in spread_indices(len(reader), samples)]


def crop_bound_round(folder: str, pack: str, cores: int, samples: int, batches: int) -> dict[str, float]:
    """One round at one size: the bare crop path (each box drawn beforehand: decode at its DCT scale, cut, resize,
    flip, no loader, no draw) on one core x ``cores`` just before and just after `make_loader`'s training loader over
    the same pack, and the tutorial's own loader (``train_pipeline.torchvision_loader``) over the folder."""
    crop = RandomResizedCrop(OUT)
    boxes = [crop.draw(*displayed_hw(open_image(data)), k) for k, data in enumerate(sample_bytes(pack, samples))]

    def bare(k: int, data: bytes) -> None:
        decode_box(data, boxes[k], crop.output_hw, ENGINE)

    def labkit_loader(slots: bool) -> float:
        return timed_run(
            lambda: make_loader(
                PackedDataset(pack, ENGINE, crop=crop),
                batch_size=BATCH,
                shuffle=True,
                num_workers=cores,
                pin_memory=False,
                batch_slots=slots,
            ),
            batches,
        )

    before = one_core_rate(pack, samples, bare) * cores
    plain, slots = labkit_loader(False), labkit_loader(True)
    after = one_core_rate(pack, samples, bare) * cores
    tutorial = timed_run(lambda: torchvision_loader(folder, cores), batches)
    bound = (before + after) / 2
    return {
        "bound_images_per_s": bound,
        "bound_before_after": [before, after],
        "loader_images_per_s": max(plain, slots),
        "make_loader_images_per_s": plain,
        "batch_slots_images_per_s": slots,
        "fraction": max(plain, slots) / bound,
        "tutorial_loader_images_per_s": tutorial,
    }


def crop_bounds(
    sets: dict[str, tuple[str, str]], cores: int, rounds: int, samples: int, batches: int
) -> dict[str, Any]:
    """`crop_bound_round` ``rounds`` times for each set (label: (folder, pack)), printed with the goal's outcome and
    2.5x the tutorial's loader set beside the bound."""
    found: dict[str, Any] = {}
    for label, (folder, pack) in sets.items():
        per_round = [crop_bound_round(folder, pack, cores, samples, batches) for _ in range(rounds)]
        fractions = [r["fraction"] for r in per_round]
        bound, tutorial = (
            median(r[k] for r in per_round) for k in ("bound_images_per_s", "tutorial_loader_images_per_s")
        )
        loader, fraction = median(r["loader_images_per_s"] for r in per_round), median(fractions)
        plain, slots = (
            median(r[k] for r in per_round) for k in ("make_loader_images_per_s", "batch_slots_images_per_s")
        )
        outcome = goal_outcome(fraction, min(fractions), max(fractions), CROP_BOUND_GOAL)
        reachable = BASELINE_GOAL * tutorial <= bound
        found[label] = {
            "rounds": per_round,
            "bound_images_per_s": bound,
            "loader_images_per_s": loader,
            "make_loader_images_per_s": plain,
            "batch_slots_images_per_s": slots,
            "fraction": fraction,
            "goal": CROP_BOUND_GOAL,
            "goal_outcome": outcome,
            "tutorial_loader_images_per_s": tutorial,
            "baseline_goal_within_bound": reachable,
        }
        print(
            f"{label}: crop-decode bound ({ENGINE}, boxes drawn beforehand, one core x {cores}) {bound:.0f} "
            f"images/s; the faster of make_loader ({plain:.0f}) and make_loader(batch_slots=True) ({slots:.0f}) in "
            f"each round: {loader:.0f} images/s = {fraction:.0%} of it (rounds {min(fractions):.0%}-"
            f"{max(fractions):.0%}); goal {CROP_BOUND_GOAL:.0%}: {outcome}"
        )
        print(
            f"  the tutorial's loader: {tutorial:.0f} images/s; {BASELINE_GOAL}x that is "
            f"{BASELINE_GOAL * tutorial:.0f} = {BASELINE_GOAL * tutorial / bound:.0%} of the bound"
            + (
                ""
                if reachable
                else f": above it, so no loader built on {ENGINE}'s crop path reaches {BASELINE_GOAL}x here"
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds of v1, v5 and v6, each bracketed by its bound; medians over rounds reported",
    )
    parser.add_argument(
        "--only",
        choices=("versions", "crops"),
        default=None,
        help="only the ablation's versions against their bounds, or only the crop-decode bound",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    out = result_path("limits_crops" if args.only == "crops" else "limits", quick, args.json)
    ws = prepare(args.data, quick=quick, progress=False)
    cores = usable_cpus()
    info = machine_info()
    results: dict[str, Any] = {"machine": info, "images": ws.count}
    if args.only != "versions":
        folder = os.path.join(data_root(), "photos-160x120")
        make_photos(folder, SMALL, progress=False)
        small = prepare(folder, quick=True, progress=False, recheck=False)
        print(f"Machine: {describe_machine(info)}")
        results["crops"] = crop_bounds(
            {
                f"{ws.count} photos of {args.data or '800x600'}": (ws.folder, ws.pack),
                f"{small.count} photos of 160x120": (small.folder, small.pack),
            },
            cores,
            args.rounds,
            samples=32 if quick else 128,
            batches=2 if quick else 15,
        )
        if args.only == "crops":
            write_result(out, results)
            print(f"wrote {out}")
            return
    settings = AblationSettings(runs=1, steps=3 if quick else 20, min_seconds=0.0 if quick else 3.0)
    if quick:
        print("quick mode: a smoke test of this script; 3 batches are too few to measure, so ignore the fractions")
    rounds = []
    for k in range(args.rounds):
        rounds.append(measure_round(ws, settings, cores, samples=32 if quick else 64))
        v = rounds[-1]["versions"]
        print(
            f"round {k + 1}/{args.rounds}: "
            + ", ".join(
                f"{vid} {r['images_per_s']:.0f} images/s = {r['fraction']:.0%} of {r['bound']}" for vid, r in v.items()
            ),
            flush=True,
        )
    print(f"Machine: {describe_machine(info)}")
    decoders = rounds[0]["single_core_images_per_s"]
    print(
        f"single-core decode + resize to {OUTPUT_SIZE}x{OUTPUT_SIZE}, median over rounds: "
        + ", ".join(
            f"{name} {median(r['single_core_images_per_s'][name] for r in rounds):.0f} images/s" for name in decoders
        )
    )
    print(f"single-core copy bandwidth: {median(r['copy_bytes_per_s'] for r in rounds) / 1e9:.2f} GB/s")
    summary = {}
    for vid in rounds[0]["versions"]:
        per_round = [r["versions"][vid] for r in rounds]
        summary[vid] = {
            "images_per_s": median(r["images_per_s"] for r in per_round),
            "fraction": median(r["fraction"] for r in per_round),
            "vs_v1": median(
                r["images_per_s"] / rr["versions"]["v1"]["images_per_s"] for r, rr in zip(per_round, rounds)
            ),
        }
        print(
            f"  {vid}: median {summary[vid]['images_per_s']:8.1f} images/s, {summary[vid]['fraction']:.0%} of its "
            f"bound, {summary[vid]['vs_v1']:.2f}x v1 (per round: "
            + ", ".join(f"{r['fraction']:.0%}" for r in per_round)
            + ")"
        )
    if "v5" in summary:
        strict = median(r["versions"]["v5"]["fraction_of_best_pass_bound"] for r in rounds)
        summary["v5"]["fraction_of_best_pass_bound"] = strict
        print(f"  v5 against the best single-core pass around it instead of the median ones: {strict:.0%}")
        together = median(r["parallel_decode_images_per_s"] for r in rounds)
        scaling = median(r["parallel_decode_vs_bound"] for r in rounds)
        of_together = median(r["versions"]["v5"]["fraction_of_parallel_decode"] for r in rounds)
        summary["v5"]["fraction_of_parallel_decode"] = of_together
        print(
            f"  {cores} bare processes decoding at once, no loader: {together:.0f} images/s = {scaling:.0%} of "
            f"{cores} x the single-core rate; v5 reaches {of_together:.0%} of that"
        )
        fresh, reused = (
            median(r["worker_stack_ms"][k] for r in rounds) for k in ("fresh_shared_memory", "reused_memory")
        )
        decode_ms = (
            settings.batch_size
            / median(r["single_core_images_per_s"][r["versions"]["v5"]["decoder"]] for r in rounds)
            * 1000
        )
        summary["v5"]["worker_stack_ms"] = {
            "fresh_shared_memory": fresh,
            "reused_memory": reused,
            "decode_batch_ms": decode_ms,
        }
        print(
            f"  a worker stacks a batch of {settings.batch_size} into fresh shared memory in {fresh:.1f} ms "
            f"(into reused memory {reused:.1f} ms), {fresh / decode_ms:.1%} of the {decode_ms:.0f} ms it takes "
            "to decode that batch on one core"
        )
    write_result(out, {**results, "rounds": rounds, "median": summary})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
