#!/usr/bin/env python3
"""Soak: many epochs with 2 persistent workers; memory per process per epoch, open fds and /dev/shm after.

Reads the encoded pack of ``--data`` (made, packed and verified by `labkit.workspace.prepare`
when missing: 256 images in quick mode) through `make_loader` with persistent workers, and at the
end of every epoch records the resident, anonymous and private memory of the main process and of
each worker (`labkit.soak`). It flags any process whose RSS grew more than 10 % from the end of the
first epoch to the end of the last, any file descriptor the main process kept, and any
/dev/shm segment left behind; writes the records as JSON and a plot of memory per epoch.

    LABKIT_QUICK=1 python benchmarks/soak.py --data /tmp/soakdata   # 256 images, 20 epochs
    python benchmarks/soak.py --epochs 50                           # data/photos, 2,000 images
"""

from __future__ import annotations

import argparse
import json
import os

from labkit.datasets import PackedDataset
from labkit.measure import describe_machine, machine_info
from labkit.samplers import BlockShuffleSampler
from labkit.settings import quick_mode
from labkit.soak import SoakReport, run_soak
from labkit.workspace import OUTPUT_SIZE, prepare


def plot(report: SoakReport, path: str, title: str) -> None:
    """RSS, anonymous and private memory of each process at the end of each epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [e.epoch for e in report.epochs]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, kind, label in zip(axes, ("rss", "anonymous", "private"), ("RSS", "anonymous (heap)", "private (USS)")):
        for role in report.pids:
            ax.plot(epochs, [getattr(e, kind)[role] / 2**20 for e in report.epochs], marker=".", label=role)
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{label}, MiB")
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
    parser.add_argument("--data", default="data/photos", help="ImageFolder to pack (made if missing)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--decoder", default="pil-reduced")
    parser.add_argument("--json", default=None, help="write results here (default benchmarks/results/...)")
    parser.add_argument("--plot", default=None, help="write the plot here (default: beside the JSON, .png)")
    args = parser.parse_args()
    ws = prepare(args.data, quick=quick_mode(), progress=False)
    dataset = PackedDataset(ws.pack, decoder=args.decoder, size=OUTPUT_SIZE)
    sampler = BlockShuffleSampler(len(dataset), block_size=64, window=4, seed=0)
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    print(f"soak: {args.epochs} epochs of {ws.count} images from {ws.pack} ({args.decoder}, {OUTPUT_SIZE}px), "
          f"batch {args.batch_size}, {args.workers} persistent workers")
    report = run_soak(dataset, epochs=args.epochs, batch_size=args.batch_size, num_workers=args.workers,
                      sampler=sampler, progress=True)
    print(report.summary())
    seconds = [e.seconds for e in report.epochs]
    print(f"epoch time: {seconds[0]:.2f} s first, {min(seconds):.2f}-{max(seconds[1:]):.2f} s after")
    out = args.json or os.path.join(os.path.dirname(__file__), "results", f"soak_{info['cpu_count']}cpu.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"machine": info, "pack": ws.pack, "images": ws.count, "decoder": args.decoder,
                   "size": OUTPUT_SIZE, "batch_size": args.batch_size, "workers": args.workers,
                   **report.to_dict()}, f, indent=1)
    picture = args.plot or os.path.splitext(out)[0] + ".png"
    plot(report, picture, f"{args.epochs} epochs, {ws.count} images, {args.workers} persistent workers — "
                          f"{describe_machine(info)}")
    print(f"wrote {out} and {picture}")


if __name__ == "__main__":
    main()
