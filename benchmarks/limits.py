#!/usr/bin/env python3
"""The physical bound on this machine, and how close each version gets to it, measured in one run.

* decode bound: each decoder's single-core rate (read + decode + resize to 256x256, one
  process, one thread) x the usable cores — no loader can decode faster than that;
* copy bound: single-core memory-copy bandwidth over the bytes each pre-decoded image is
  copied (mmap -> batch, batch -> shared memory) x the cores;
* parallel decode: ``cores`` bare processes decoding at once, no loader — what the cores give
  together, which on a VM or a laptop can be well under cores x one core;
* then v1, v5 and v6 of the ablation, in the same process, each as a fraction of its bound.

A shared or virtual machine's speed drifts by tens of percent from minute to minute, so the
bounds and the versions are measured alternately, ``--rounds`` times, and each fraction is
taken within its round; the medians over rounds are reported.

    python benchmarks/limits.py                    # data/photos, made if missing
    LABKIT_QUICK=1 python benchmarks/limits.py --rounds 2    # 256 images
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from statistics import median
from typing import Any, Sequence

import torch

from labkit.ablation import VERSIONS, Settings, measure_version
from labkit.decode import DECODERS, decode
from labkit.measure import describe_machine, machine_info, spread_indices
from labkit.packfile import PackReader
from labkit.settings import quick_mode, usable_cpus
from labkit.workspace import OUTPUT_SIZE, prepare


def single_core_rates(pack: str, samples: int, repeats: int = 3) -> dict:
    """images/s of each decoder on one core: read from the pack, decode, resize.

    The median of ``repeats`` passes, the same statistic as the versions' images/s, so the
    fraction compares like with like; the best pass is kept too (``best``).
    """
    reader = PackReader(pack)
    indices = spread_indices(len(reader), samples)
    rates, best = {}, {}
    for name in DECODERS:
        decode(reader.read(0), OUTPUT_SIZE, name)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in indices:
                decode(reader.read(i), OUTPUT_SIZE, name)
            times.append(time.perf_counter() - t0)
        rates[name], best[name] = len(indices) / median(times), len(indices) / min(times)
    return {"median": rates, "best": best}


def copy_bandwidth(decoded_pack: str, repeats: int = 5) -> float:
    """Single-core bytes/s copying a batch of decoded images out of the page-cached mmap (median pass)."""
    reader = PackReader(decoded_pack, check_crc=False)
    n = min(64, len(reader))
    reader.read_decoded(range(n))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        batch = reader.read_decoded(range(n))
        times.append(time.perf_counter() - t0)
    return batch.nbytes / median(times)


def _decode_all(pack: str, decoder: str, indices: Sequence[int], barrier: Any, results: Any) -> None:
    torch.set_num_threads(1)
    reader = PackReader(pack)
    decode(reader.read(indices[0]), OUTPUT_SIZE, decoder)  # imports and first-call costs before the clock
    barrier.wait()
    t0 = time.perf_counter()
    for i in indices:
        decode(reader.read(i), OUTPUT_SIZE, decoder)
    results.put(time.perf_counter() - t0)


def parallel_decode_rate(pack: str, decoder: str, processes: int, samples: int) -> float:
    """images/s of ``processes`` bare processes decoding at once, started together, no loader at all:
    what the cores really give when they all work (shared caches, memory, clock limits)."""
    ctx = mp.get_context()
    barrier, results = ctx.Barrier(processes, timeout=120), ctx.Queue()
    indices = spread_indices(len(PackReader(pack)), samples)
    procs = [ctx.Process(target=_decode_all, args=(pack, decoder, indices, barrier, results), daemon=True)
             for _ in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"parallel decode: {len(failed)} of {processes} processes failed (exit codes {failed})")
    return processes * len(indices) / max(results.get(timeout=10) for _ in procs)


def measure_round(ws, settings: Settings, cores: int, samples: int) -> dict:
    """One round: the single-core rates and copy bandwidth, then v1, v5 and v6, each against its bound."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    measured = single_core_rates(ws.pack, samples)
    rates = measured["median"]
    bandwidth = copy_bandwidth(ws.decoded_pack)
    torch.set_num_threads(threads)
    fastest = max(rates, key=rates.get)
    together = parallel_decode_rate(ws.pack, fastest, cores, samples)
    image_bytes = 3 * OUTPUT_SIZE * OUTPUT_SIZE
    bounds = {"v1": (rates["pil"], "pil on 1 core (no workers)"),
              "v5": (rates[fastest] * cores, f"{fastest} x {cores} cores"),
              "v6": (bandwidth / (2 * image_bytes) * cores,
                     f"2 copies of {image_bytes / 1e3:.0f} KB per image x {cores} cores")}
    rows = {}
    for version in VERSIONS:
        if version.id in bounds:
            decoder = fastest if version.decoder == "fastest" else version.decoder
            bound, what = bounds[version.id]
            rate = measure_version(version, ws, settings, decoder).images_per_s
            rows[version.id] = {"images_per_s": rate, "bound_images_per_s": bound, "fraction": rate / bound,
                                "bound": what, "decoder": decoder}
    if "v5" in rows:
        v5 = rows["v5"]["images_per_s"]
        rows["v5"]["fraction_of_best_pass_bound"] = v5 / (measured["best"][fastest] * cores)  # stricter still
        rows["v5"]["fraction_of_parallel_decode"] = v5 / together
    return {"single_core_images_per_s": rates, "single_core_best_pass": measured["best"],
            "parallel_decode_images_per_s": together, "parallel_decode_vs_bound": together / bounds["v5"][0],
            "copy_bytes_per_s": bandwidth, "versions": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/photos")
    parser.add_argument("--rounds", type=int, default=5,
                        help="bounds and versions measured alternately this many times; medians reported")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    ws = prepare(args.data, quick=quick, progress=False)
    cores = usable_cpus()
    settings = Settings(runs=1, steps=3 if quick else 20)
    rounds = []
    for k in range(args.rounds):
        rounds.append(measure_round(ws, settings, cores, samples=32 if quick else 64))
        v = rounds[-1]["versions"]
        print(f"round {k + 1}/{args.rounds}: " + ", ".join(
            f"{vid} {r['images_per_s']:.0f} images/s = {r['fraction']:.0%} of {r['bound']}" for vid, r in v.items()),
            flush=True)
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    decoders = rounds[0]["single_core_images_per_s"]
    print(f"single-core decode + resize to {OUTPUT_SIZE}x{OUTPUT_SIZE}, median over rounds: " +
          ", ".join(f"{name} {median(r['single_core_images_per_s'][name] for r in rounds):.0f} images/s"
                    for name in decoders))
    print(f"single-core copy bandwidth: {median(r['copy_bytes_per_s'] for r in rounds) / 1e9:.2f} GB/s")
    summary = {}
    for vid in rounds[0]["versions"]:
        per_round = [r["versions"][vid] for r in rounds]
        summary[vid] = {"images_per_s": median(r["images_per_s"] for r in per_round),
                        "fraction": median(r["fraction"] for r in per_round),
                        "vs_v1": median(r["images_per_s"] / rr["versions"]["v1"]["images_per_s"]
                                        for r, rr in zip(per_round, rounds))}
        print(f"  {vid}: median {summary[vid]['images_per_s']:8.1f} images/s, {summary[vid]['fraction']:.0%} of its "
              f"bound, {summary[vid]['vs_v1']:.2f}x v1 (per round: "
              + ", ".join(f"{r['fraction']:.0%}" for r in per_round) + ")")
    if "v5" in summary:
        strict = median(r["versions"]["v5"]["fraction_of_best_pass_bound"] for r in rounds)
        summary["v5"]["fraction_of_best_pass_bound"] = strict
        print(f"  v5 against the best single-core pass instead of the median one: {strict:.0%}")
        together = median(r["parallel_decode_images_per_s"] for r in rounds)
        scaling = median(r["parallel_decode_vs_bound"] for r in rounds)
        of_together = median(r["versions"]["v5"]["fraction_of_parallel_decode"] for r in rounds)
        summary["v5"]["fraction_of_parallel_decode"] = of_together
        print(f"  {cores} bare processes decoding at once, no loader: {together:.0f} images/s = {scaling:.0%} of "
              f"{cores} x the single-core rate; v5 reaches {of_together:.0%} of that")
    out = args.json or os.path.join(os.path.dirname(__file__), "results",
                                    f"limits_{info['cpu_count']}cpu{'_quick' if quick else ''}.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"machine": info, "images": ws.count, "rounds": rounds, "median": summary}, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
