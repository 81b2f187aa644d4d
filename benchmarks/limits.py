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
* then v1, v5 and v6 of the ablation, in the same process, each as a fraction of its bound.

A shared or virtual machine's speed drifts by tens of percent from minute to minute, so each
version is bracketed by measurements of its bound taken just before and just after it, and its
fraction is taken against their mean; ``--rounds`` rounds, medians over rounds reported.

    python benchmarks/limits.py                    # data/photos, made if missing
    LABKIT_QUICK=1 python benchmarks/limits.py --rounds 2    # 256 images
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
from statistics import median
from typing import Any, Sequence

import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from labkit.bench.ablation import VERSIONS, AblationSettings, measure_version
from labkit.bench.workspace import OUTPUT_SIZE, prepare
from labkit.core.environment import quick_mode, usable_cpus
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import Stopwatch, time_calls
from labkit.decode.registry import DECODERS, decode_image
from labkit.measure.loader_timing import spread_indices
from labkit.measure.result_files import result_path, write_result
from labkit.storage.pack_format import PackReader
from labkit.workers.thread_budget import torch_threads


def single_core_rates(pack: str, samples: int, repeats: int = 3, decoders: Sequence[str] = DECODERS) -> dict:
    """images/s of each decoder on one core: read from the pack, decode, resize.

    The median of ``repeats`` passes, the same statistic as the versions' images/s, so the
    fraction compares like with like; the best pass is kept too (``best``).
    """
    reader = PackReader(pack)
    indices = spread_indices(len(reader), samples)
    rates, best = {}, {}
    for name in decoders:
        passes = time_calls(lambda name=name: [decode_image(reader.read(i), OUTPUT_SIZE, name) for i in indices],
                            repeats, warmup=1)
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
        images = [torch.randint(0, 256, (3, OUTPUT_SIZE, OUTPUT_SIZE), dtype=torch.uint8)
                  for _ in range(self.batch_size)]
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


BOUND_TEXT = {"v1": "pil on 1 core (no workers)", "v5": "the fastest decoder ({decoder}) x {cores} cores",
              "v6": "2 copies of {kb:.0f} KB per image x {cores} cores"}


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
        rows[version.id] = {"images_per_s": rate, "bound_images_per_s": means[top], "fraction": rate / means[top],
                            "fraction_of_best_pass_bound": rate / best, "bound_before_after": [before, after],
                            "bound": BOUND_TEXT[version.id].format(decoder=top, cores=cores,
                                                                   kb=3 * OUTPUT_SIZE * OUTPUT_SIZE / 1e3),
                            "decoder": decoder}
    if "v5" in rows:
        rows["v5"]["fraction_of_parallel_decode"] = rows["v5"]["images_per_s"] / together
    return {"single_core_images_per_s": rates, "single_core_best_pass": measured["best"],
            "parallel_decode_images_per_s": together, "parallel_decode_vs_bound": together / (rates[fastest] * cores),
            "copy_bytes_per_s": bandwidth, "worker_stack_ms": stack_ms, "versions": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds of v1, v5 and v6, each bracketed by its bound; medians over rounds reported")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    out = result_path("limits", quick, args.json)
    ws = prepare(args.data, quick=quick, progress=False)
    cores = usable_cpus()
    settings = AblationSettings(runs=1, steps=3 if quick else 20, min_seconds=0.0 if quick else 3.0)
    if quick:
        print("quick mode: a smoke test of this script; 3 batches are too few to measure, so ignore the fractions")
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
        print(f"  v5 against the best single-core pass around it instead of the median ones: {strict:.0%}")
        together = median(r["parallel_decode_images_per_s"] for r in rounds)
        scaling = median(r["parallel_decode_vs_bound"] for r in rounds)
        of_together = median(r["versions"]["v5"]["fraction_of_parallel_decode"] for r in rounds)
        summary["v5"]["fraction_of_parallel_decode"] = of_together
        print(f"  {cores} bare processes decoding at once, no loader: {together:.0f} images/s = {scaling:.0%} of "
              f"{cores} x the single-core rate; v5 reaches {of_together:.0%} of that")
        fresh, reused = (median(r["worker_stack_ms"][k] for r in rounds) for k in ("fresh_shared_memory", "reused_memory"))
        decode_ms = settings.batch_size / median(r["single_core_images_per_s"][r["versions"]["v5"]["decoder"]]
                                                 for r in rounds) * 1000
        summary["v5"]["worker_stack_ms"] = {"fresh_shared_memory": fresh, "reused_memory": reused,
                                            "decode_batch_ms": decode_ms}
        print(f"  a worker stacks a batch of {settings.batch_size} into fresh shared memory in {fresh:.1f} ms "
              f"(into reused memory {reused:.1f} ms), {fresh / decode_ms:.1%} of the {decode_ms:.0f} ms it takes "
              "to decode that batch on one core")
    write_result(out, {"machine": info, "images": ws.count, "rounds": rounds, "median": summary})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
