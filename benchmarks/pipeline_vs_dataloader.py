#!/usr/bin/env python3
"""Two-stage pipeline (labkit.workers.staged_pipeline) against a single-stage DataLoader on the same clips.

Both do the same work per clip — decode every JPEG frame, then resize, crop and lay out as
C×H×W — with the same number of processes. Runs alternate, the median of ``--runs`` is
reported, and the machine is printed beside the numbers.

    python benchmarks/pipeline_vs_dataloader.py            # 64 clips of 16 frames, 320x240
    LABKIT_QUICK=1 python benchmarks/pipeline_vs_dataloader.py
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics

from torch.utils.data import DataLoader

from labkit.core.environment import quick_mode, usable_cpus
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import Stopwatch
from labkit.core.user_paths import require_folder
from labkit.harness.clips import ClipFolderDataset, decode_clip, transform_clip
from labkit.harness.synthetic_data import ClipSpec, make_clips
from labkit.harness.workspace import data_root
from labkit.measure.result_files import result_path, write_result
from labkit.workers.staged_pipeline import StagedPipeline


def _time(fn) -> float:
    watch = Stopwatch()
    count = fn()
    return count / (watch.elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=None,
        help="a folder of clips (only read); default: the kit's clips, made on first use in its data folder",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None, help="write results here (default benchmarks/results/...)")
    args = parser.parse_args()
    quick = quick_mode()
    out = result_path("pipeline_vs_dataloader", quick, args.json)
    spec = ClipSpec(n=16 if quick else 64, frames=8 if quick else 16)
    if args.data:
        require_folder(args.data, "--data", holds="clips (root/<class>/<clip>/frameNNN.jpg)")
    else:
        args.data = os.path.join(data_root(), "clips-quick" if quick else "clips")
        print(make_clips(args.data, spec, progress=False))
    processes = max(2, usable_cpus())
    decoders = max(1, processes // 2)
    transformers = max(1, processes - decoders)
    size = (spec.height, spec.width)
    dataset = ClipFolderDataset(args.data, spec.frames, size)
    folders = [dataset.clip_path(i) for i in range(len(dataset))]

    def single_stage() -> int:
        loader = DataLoader(dataset, batch_size=None, num_workers=processes)
        return sum(1 for _ in loader)

    def two_stage() -> int:
        pipe = StagedPipeline(
            folders,
            functools.partial(decode_clip, frames=spec.frames, size=size),
            transform_clip,
            (spec.frames, spec.height, spec.width, 3),
            num_decoders=decoders,
            num_transformers=transformers,
            slots=2 * processes,
        )
        return sum(1 for _ in pipe)

    rates = {"dataloader": [], "pipeline": []}
    for _ in range(args.runs):
        rates["dataloader"].append(_time(single_stage))
        rates["pipeline"].append(_time(two_stage))
    median = {k: statistics.median(v) for k, v in rates.items()}
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    print(f"{len(dataset)} clips x {spec.frames} frames {spec.width}x{spec.height} -> 112x112, median of {args.runs}")
    print(f"  single-stage DataLoader, {processes} workers:        {median['dataloader']:.2f} clips/s")
    print(f"  two-stage pipeline, {decoders} decode + {transformers} transform: {median['pipeline']:.2f} clips/s")
    print(f"  ratio pipeline / dataloader: {median['pipeline'] / median['dataloader']:.2f}")
    write_result(
        out,
        {
            "machine": info,
            "settings": {
                "clips": len(dataset),
                "frames": spec.frames,
                "processes": processes,
                "decoders": decoders,
                "transformers": transformers,
                "runs": args.runs,
            },
            "clips_per_s": rates,
            "median_clips_per_s": median,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
