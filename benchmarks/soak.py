#!/usr/bin/env python3
"""Soak: many epochs with 2 persistent workers; memory per process per epoch, open fds and /dev/shm after.

Reads the encoded pack of ``--data`` (made, packed and verified by `labkit.harness.workspace.prepare`
when missing: 256 images in quick mode) through `make_loader` with persistent workers, and reads
every memory figure of the main process and of each worker after their first batches and at the end
of every epoch (`labkit.diagnose.soak`). It flags any process whose unique anonymous memory (what a leak or
copy-on-write grows) grew more than 10 % and 16 MiB, any file descriptor the main process kept, and any
/dev/shm segment left behind; it explains any growth of RSS by kind of page (the pack's pages,
mapped as the epochs read it, are file-backed and reclaimable), and says how much of the pack sits
in the page cache. Writes the records as JSON and a plot of memory per epoch.

    LABKIT_QUICK=1 python benchmarks/soak.py --data data/soak-quick   # 256 images, 20 epochs
    python benchmarks/soak.py --epochs 50                            # data/photos, 2,000 images
"""

from __future__ import annotations

import argparse
import os

from labkit.core.environment import quick_mode
from labkit.core.machine import describe_machine, machine_info, os_name
from labkit.core.user_paths import check_output_file
from labkit.datasets.pack_datasets import PackedDataset
from labkit.diagnose.soak import SoakReport, run_soak
from labkit.harness.workspace import OUTPUT_SIZE, prepare
from labkit.measure.page_cache import resident_fraction
from labkit.measure.process_memory import MEASURES
from labkit.measure.result_files import result_path, write_result
from labkit.samplers.block_shuffle import BlockShuffleSampler

PANELS = (
    ("rss", "RSS (what top shows)"),
    ("file_backed", "file-backed: the pack's pages, libraries"),
    ("unique_anonymous", "unique anonymous: the verdict's"),
)


def plot(report: SoakReport, path: str, title: str) -> None:
    """RSS, its file-backed part and the verdict's unique memory of each process, after the first
    batches (epoch 0) and at the end of each epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    records = [report.first_batch, *report.epochs]
    epochs = [e.epoch for e in records]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    panels = list(PANELS)
    if report.leak_measure != "unique_anonymous":
        panels[2] = (report.leak_measure, f"{MEASURES[report.leak_measure]}: the verdict's")
    for ax, (kind, label) in zip(axes, panels):
        ax.set_xlabel("epoch (0: after the first batches)")
        ax.set_ylabel(f"{label}, MiB", fontsize=8)
        if any(getattr(e, kind)[role] is None for e in records for role in report.pids):
            ax.text(0.5, 0.5, f"not available on {os_name()}", ha="center", transform=ax.transAxes)
            continue
        for role in report.pids:
            ax.plot(epochs, [getattr(e, kind)[role] / 2**20 for e in records], marker=".", label=role)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--decoder", default="pil-reduced")
    parser.add_argument("--json", default=None, help="write results here (default benchmarks/results/...)")
    parser.add_argument("--plot", default=None, help="write the plot here (default: beside the JSON, .png)")
    args = parser.parse_args()
    out = result_path("soak", quick_mode(), args.json)
    picture = check_output_file(args.plot, "--plot") if args.plot else os.path.splitext(out)[0] + ".png"
    ws = prepare(args.data, quick=quick_mode(), progress=False)
    dataset = PackedDataset(ws.pack, decoder=args.decoder, size=OUTPUT_SIZE)
    sampler = BlockShuffleSampler(len(dataset), block_size=64, window=4, seed=0)
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    print(
        f"soak: {args.epochs} epochs of {ws.count} images from {ws.pack} ({args.decoder}, {OUTPUT_SIZE}px), "
        f"batch {args.batch_size}, {args.workers} persistent workers"
    )
    report = run_soak(
        dataset,
        epochs=args.epochs,
        batch_size=args.batch_size,
        num_workers=args.workers,
        sampler=sampler,
        progress=True,
    )
    print(report.summary())
    seconds = [e.seconds for e in report.epochs]
    print(f"epoch time: {seconds[0]:.2f} s first, {min(seconds):.2f}-{max(seconds[1:]):.2f} s after")
    cached = resident_fraction(ws.pack)
    pack_mib = os.path.getsize(ws.pack) / 2**20
    print(
        f"pack: {pack_mib:.0f} MiB, "
        + (
            f"{cached:.0%} of it in the page cache after the run"
            if cached is not None
            else f"page-cache residency not available on {os_name()}"
        )
    )
    write_result(
        out,
        {
            "machine": info,
            "pack": os.path.relpath(ws.pack),
            "pack_mib": pack_mib,
            "pack_in_page_cache": cached,
            "images": ws.count,
            "decoder": args.decoder,
            "size": OUTPUT_SIZE,
            "batch_size": args.batch_size,
            "workers": args.workers,
            **report.to_dict(),
        },
    )
    plot(
        report,
        picture,
        f"{args.epochs} epochs, {ws.count} images, {args.workers} persistent workers — {describe_machine(info)}",
    )
    print(f"wrote {out} and {picture}")


if __name__ == "__main__":
    main()
