#!/usr/bin/env python3
"""`ThreadLoader` (decode threads of the main process, no workers) against `make_loader`'s process workers, on the
training pipeline: a pack, random-resized crops of 224 with flips decoded by the fastest decoder, batch 64.

Each run is a fresh process with a fresh loader: a warm-up of one batch and those the loader made ahead meanwhile, then
``--batches`` batches timed (about two seconds, epoch after epoch); the two loaders alternate, and the ratio is the
median of the runs' pairs. ``--small`` adds a 160x120 copy of the photos (every crop an upscale, so the resize and the
Python around each sample weigh most). Threads hold the GIL for the Python work of each sample and release it in the
decoder: their ratio to processes is what that Python costs.

    python benchmarks/threads_vs_processes.py --small            # the kit's 800x600 photos, made if missing
    LABKIT_QUICK=1 python benchmarks/threads_vs_processes.py --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from statistics import median
from typing import Any

from labkit.core.cpus import cpu_budget
from labkit.core.environment import quick_mode
from labkit.core.machine import describe_machine, machine_info
from labkit.harness.synthetic_data import PhotoSpec, make_photos
from labkit.harness.workspace import data_root, prepare
from labkit.measure.result_files import result_path, write_result

LOADERS = ("threads", "processes")


def one_run(pack: str, loader: str, batches: int) -> float:
    """Images per second of one fresh loader (in this process)."""
    from labkit.core.timing import Stopwatch
    from labkit.datasets.pack_datasets import PackedDataset
    from labkit.decode.random_crop import RandomResizedCrop
    from labkit.measure.loader_timing import prefetched_batches
    from labkit.workers.loader_factory import make_loader
    from labkit.workers.thread_loader import ThreadLoader

    dataset = PackedDataset(pack, crop=RandomResizedCrop(224, seed=0))
    made = (
        ThreadLoader(dataset, batch_size=64, pin_memory=False)
        if loader == "threads"
        else make_loader(
            dataset,
            batch_size=64,
            num_workers=cpu_budget(main_process_steps=False).workers_per_rank,
            seed=0,
            pin_memory=False,
        )
    )

    def endless() -> Iterator[Any]:  # epoch after epoch: a short set must not end a run early
        while True:
            yield from made

    batches_seen = endless()
    for _ in range(1 + prefetched_batches(made)):  # warm-up: worker start, and the batches made ahead during it
        next(batches_seen)
    images = 0
    clock = Stopwatch()
    for k, (batch, _) in enumerate(batches_seen):
        images += len(batch)
        if k + 1 == batches:
            break
    return images / clock.elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--small", action="store_true", help="also a 160x120 set")
    parser.add_argument("--runs", type=int, default=5, help="alternating runs of each loader; medians")
    parser.add_argument(
        "--batches",
        type=int,
        default=None,
        help="timed batches per run (default: 16 at 800x600, 80 at 160x120, about 2 s each; 4 quick)",
    )
    parser.add_argument("--json", default=None)
    parser.add_argument("--one", nargs=3, metavar=("PACK", "LOADER", "BATCHES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one[0], args.one[1], int(args.one[2]))))
        return
    quick = quick_mode()
    per_set = {"800x600": 16, "160x120": 80}
    sets = {"800x600": prepare(args.data, quick=quick, progress=False).pack}
    if args.small:
        small = os.path.join(data_root(), "photos-160x120" + ("-quick" if quick else ""))
        if not os.path.exists(small):
            make_photos(small, PhotoSpec(n=256 if quick else 2000, width=160, height=120), progress=False)
        sets["160x120"] = prepare(small, quick=quick, progress=False).pack
    rates: dict[str, dict[str, list[float]]] = {name: {loader: [] for loader in LOADERS} for name in sets}
    for run in range(args.runs):
        for name, pack in sets.items():
            for loader in LOADERS:
                batches = args.batches or (4 if quick else per_set[name])
                done = subprocess.run(
                    [sys.executable, __file__, "--one", pack, loader, str(batches)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rate = float(done.stdout.strip().splitlines()[-1])
                rates[name][loader].append(rate)
                print(f"run {run + 1}/{args.runs}: {name} {loader:<9} {rate:7.1f} images/s", flush=True)
    info = machine_info()
    timed = {name: args.batches or (4 if quick else per_set[name]) for name in sets}
    print(f"Machine: {describe_machine(info)}; random-resized crops of 224, batch 64, timed batches a run: {timed}")
    ratios = {}
    for name, by_loader in rates.items():
        pairs = [t / p for t, p in zip(by_loader["threads"], by_loader["processes"])]
        ratios[name] = pairs
        print(
            f"  {name}: threads {median(by_loader['threads']):.1f}, processes {median(by_loader['processes']):.1f} "
            f"images/s; threads / processes median {median(pairs):.2f}x ({', '.join(f'{r:.2f}' for r in pairs)})"
        )
    out = result_path("threads_vs_processes", quick, args.json)
    write_result(out, {"machine": info, "batches": timed, "images_per_s": rates, "threads_over_processes": ratios})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
