"""A plain training loop over the course's photos, with nothing in it that measures anything.

Set LABKIT_PROFILE=1 in its environment and the loader that `labkit.workers.loader_factory.make_loader` returns is
wrapped in `labkit.workers.profiled_loader.ProfiledLoader`, which prints after every epoch how long the loop waited
for data and how long it spent on each batch — without a line of this file changing (notebook 11):

    LABKIT_PROFILE=1 python -m labkit.course.train_small --epochs 2

It lives in the package, not beside the notebooks, so that ``python -m`` finds it from any working directory.
"""

from __future__ import annotations

import argparse

from labkit.datasets.pack_datasets import PackedDataset
from labkit.device.transfer import DevicePrefetcher
from labkit.harness.ablation_loaders import model_step
from labkit.harness.workspace import course_workspace
from labkit.workers.loader_factory import make_loader


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--decoder", default="pil-reduced")
    parser.add_argument("--size", type=int, default=256, help="side of the square images the model sees")
    parser.add_argument("--pack", default=None, help="an encoded pack to train on (default: the course's)")
    args = parser.parse_args(argv)

    pack = args.pack or course_workspace(progress=False).pack
    dataset = PackedDataset(pack, decoder=args.decoder, size=args.size)
    loader = make_loader(dataset, batch_size=args.batch, num_workers=args.workers)
    batches = DevicePrefetcher(loader)  # uint8 batches to normalised floats, on the GPU when there is one
    train_step = model_step(batches.device, len(dataset.classes))
    for epoch in range(args.epochs):
        steps = 0
        for batch in batches:
            train_step(batch)
            steps += 1
        print(f"epoch {epoch + 1}: {steps} steps")


if __name__ == "__main__":
    main()
