#!/usr/bin/env python3
"""The physical bound on this machine, and how close each version gets to it, measured in one run.

* decode bound: each decoder's best single-core rate (read + decode + resize to 256x256, one
  process, one thread) x the usable cores — no loader can decode faster than that;
* copy bound: single-core memory-copy bandwidth over the bytes each pre-decoded image is
  copied (mmap -> batch, batch -> shared memory) x the cores;
* then v1, v5 and v6 of the ablation, in the same process, each as a fraction of its bound.

    python benchmarks/limits.py                    # data/photos, made if missing
    LABKIT_QUICK=1 python benchmarks/limits.py     # 256 images
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from labkit.ablation import VERSIONS, Settings, measure_version
from labkit.decode import DECODERS, decode
from labkit.measure import describe_machine, machine_info
from labkit.packfile import PackReader
from labkit.settings import quick_mode, usable_cpus
from labkit.workspace import OUTPUT_SIZE, prepare


def single_core_rates(pack: str, samples: int, repeats: int = 5) -> dict:
    """images/s of each decoder on one core: read from the pack, decode, resize.

    The best of ``repeats`` passes, not the median: a bound should be the most this core
    did, so noise from other processes lowers the versions' fractions, never the bound.
    """
    reader = PackReader(pack)
    indices = range(min(samples, len(reader)))
    rates = {}
    for name in DECODERS:
        decode(reader.read(0), OUTPUT_SIZE, name)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in indices:
                decode(reader.read(i), OUTPUT_SIZE, name)
            times.append(time.perf_counter() - t0)
        rates[name] = len(indices) / min(times)
    return rates


def copy_bandwidth(decoded_pack: str, repeats: int = 5) -> float:
    """Single-core bytes/s copying a batch of decoded images out of the page-cached mmap."""
    reader = PackReader(decoded_pack, check_crc=False)
    n = min(64, len(reader))
    reader.read_decoded(range(n))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        batch = reader.read_decoded(range(n))
        times.append(time.perf_counter() - t0)
    return batch.nbytes / min(times)  # best of the repeats, as for the decode rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/photos")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    ws = prepare(args.data, quick=quick, progress=False)
    cores = usable_cpus()
    torch.set_num_threads(1)
    rates = single_core_rates(ws.pack, samples=32 if quick else 128)
    bandwidth = copy_bandwidth(ws.decoded_pack)
    torch.set_num_threads(cores)
    fastest = max(rates, key=rates.get)
    image_bytes = 3 * OUTPUT_SIZE * OUTPUT_SIZE
    bounds = {"v1": rates["pil"], "v5": rates[fastest] * cores, "v6": bandwidth / (2 * image_bytes) * cores}
    settings = Settings(runs=args.runs, steps=3 if quick else 20)
    results = {}
    for version in VERSIONS:
        if version.id in bounds:
            decoder = fastest if version.decoder == "fastest" else version.decoder
            results[version.id] = measure_version(version, ws, settings, decoder)
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    print(f"single-core decode + resize to {OUTPUT_SIZE}x{OUTPUT_SIZE}: " +
          ", ".join(f"{k} {v:.0f} images/s" for k, v in rates.items()))
    print(f"single-core copy bandwidth: {bandwidth / 1e9:.2f} GB/s")
    rows = []
    for vid, bound in bounds.items():
        r = results[vid]
        what = {"v1": "pil on 1 core (no workers)", "v5": f"{fastest} x {cores} cores",
                "v6": f"2 copies of {image_bytes / 1e3:.0f} KB per image x {cores} cores"}[vid]
        rows.append({"id": vid, "images_per_s": r.images_per_s, "bound_images_per_s": bound,
                     "fraction": r.images_per_s / bound, "bound": what})
        print(f"  {vid}: {r.images_per_s:8.1f} images/s of a {bound:8.1f} bound ({what}): "
              f"{r.images_per_s / bound:.0%}")
    v1 = results["v1"].images_per_s
    print(f"ratios in this run: v5/v1 {results['v5'].images_per_s / v1:.2f}, v6/v1 {results['v6'].images_per_s / v1:.2f}")
    out = args.json or os.path.join(os.path.dirname(__file__), "results",
                                    f"limits_{info['cpu_count']}cpu{'_quick' if quick else ''}.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"machine": info, "images": ws.count, "single_core_images_per_s": rates,
                   "copy_bytes_per_s": bandwidth, "versions": rows,
                   "runs": {k: r.runs_images_per_s for k, r in results.items()}}, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
