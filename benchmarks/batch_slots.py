#!/usr/bin/env python3
"""v5 with its batches in reused shared-memory slots (`make_loader(..., batch_slots=True)`) against the same
pipeline through `make_loader` without them, whose workers collate every batch into a fresh /dev/shm
segment: same dataset, sampler, workers, prefetch and device stage, alternating, median of pairs.

    python benchmarks/batch_slots.py                     # data/photos, made if missing
    LABKIT_QUICK=1 python benchmarks/batch_slots.py --pairs 1
"""

from __future__ import annotations

import argparse
import dataclasses
from statistics import median

from labkit.core.environment import quick_mode
from labkit.core.machine import describe_machine, machine_info
from labkit.harness.ablation import measure_version
from labkit.harness.ablation_loaders import fastest_decoder
from labkit.harness.ablation_versions import VERSIONS, AblationSettings
from labkit.harness.workspace import prepare
from labkit.measure.result_files import result_path, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs of runs; medians reported")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    out = result_path("batch_slots", quick, args.json)
    ws = prepare(args.data, quick=quick, progress=False)
    settings = AblationSettings(runs=2, steps=3 if quick else 20, min_seconds=0.0, device="cpu")
    decoder, _ = fastest_decoder(ws)
    v5 = next(v for v in VERSIONS if v.id == "v5")
    kinds = {
        "fresh shared memory (DataLoader)": dataclasses.replace(v5, batch_slots=False),
        "reused slots (SlotLoader)": v5,
    }
    rates = {name: [] for name in kinds}
    for pair in range(args.pairs):
        for name, version in kinds.items():
            rate = measure_version(version, ws, settings, decoder).images_per_s
            rates[name].append(rate)
            print(f"pair {pair + 1}/{args.pairs}: {name:<34} {rate:7.1f} images/s", flush=True)
    fresh, slots = rates.values()
    ratios = [s / f for s, f in zip(slots, fresh)]
    info = machine_info()
    print(
        f"Machine: {describe_machine(info)}; v5 with {decoder}, batch {settings.batch_size}, "
        f"{settings.resolved_num_workers()} workers, data only"
    )
    for name, values in rates.items():
        print(f"  {name:<34} median {median(values):7.1f} images/s")
    print(f"  slots / fresh: median of pairs {median(ratios):.2f}x (pairs: {', '.join(f'{r:.2f}' for r in ratios)})")
    write_result(
        out,
        {
            "machine": info,
            "decoder": decoder,
            "images": ws.count,
            "images_per_s": rates,
            "ratio_per_pair": ratios,
            "median_ratio": median(ratios),
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
