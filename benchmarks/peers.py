#!/usr/bin/env python3
"""labkit's v5 and v6 against other loaders on the same images, same output, same workers.

Peers, each used the way its documentation shows:
* WebDataset — tar shards, ``.decode("pil")``, torchvision transforms in the workers;
* MosaicML Streaming — MDS shards (jpeg column), ``StreamingDataset`` + transforms;
* torchdata ``StatefulDataLoader`` — over the image folder, PIL + transforms in the workers.
Every contender yields normalised float batches of 64 × 3 × 256 × 256, none of them mixed
(labkit's versions run here without their MixUp, which the peers do not do). Runs alternate
between contenders; the median of ``--runs`` is reported with the ratio to each peer.
Needs the peers extra: ``pip install -e ".[peers]"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import shutil
import statistics
import tarfile
from collections.abc import Callable
from typing import Any

from PIL import Image
from torch.utils.data import DataLoader
from torchvision import transforms

from labkit.core.environment import quick_mode, usable_cpus
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import Stopwatch, time_calls
from labkit.device.transfer import IMAGENET_MEAN, IMAGENET_STD
from labkit.harness.ablation_loaders import build_loader, device_batches
from labkit.harness.ablation_versions import VERSIONS, AblationSettings
from labkit.harness.workspace import OUTPUT_SIZE, prepare
from labkit.measure.result_files import result_path, write_result
from labkit.measure.verdict import judge

TRANSFORM = transforms.Compose(
    [
        transforms.Resize((OUTPUT_SIZE, OUTPUT_SIZE)),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ]
)


def samples(folder: str) -> list[tuple]:
    """(path, label) of every image of an ImageFolder, in the kit's order."""
    from labkit.storage.image_folder import scan_image_folder

    index = scan_image_folder(folder)
    return [(index.abspath(i), int(index.labels[i])) for i in range(len(index))]


def write_tar_shards(folder: str, out: str, shards_wanted: int) -> list[str]:
    """WebDataset tar shards: ``shards_wanted`` of them, so every worker gets some."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    found, shards = samples(folder), []
    per_shard = -(-len(found) // shards_wanted)
    for s in range(0, len(found), per_shard):
        path = os.path.join(out, f"shard-{s // per_shard:05d}.tar")
        with tarfile.open(path, "w") as tar:
            for k, (file, label) in enumerate(found[s : s + per_shard]):
                key = f"{s + k:08d}"
                for name, data in ((f"{key}.jpg", open(file, "rb").read()), (f"{key}.cls", str(label).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        shards.append(path)
    return shards


def write_mds(folder: str, out: str) -> None:
    from streaming import MDSWriter

    if os.path.isdir(out):
        shutil.rmtree(out)
    with MDSWriter(out=out, columns={"image": "jpeg", "label": "int"}) as writer:
        for file, label in samples(folder):
            writer.write({"image": Image.open(file), "label": label})


def webdataset_loader(shards: list[str], batch: int, workers: int, transform: Callable = TRANSFORM) -> DataLoader:
    import webdataset as wds

    dataset = (
        wds.WebDataset(shards, shardshuffle=len(shards), nodesplitter=wds.split_by_node)
        .shuffle(1000)
        .decode("pil")
        .to_tuple("jpg", "cls")
        .map_tuple(transform, int)
        .batched(batch)
    )
    return wds.WebLoader(dataset, batch_size=None, num_workers=workers)


class _MDSImages:
    """Built lazily so that importing this file does not need the streaming package."""

    @staticmethod
    def build(local: str, batch: int, transform: Callable = TRANSFORM) -> Any:
        from streaming import StreamingDataset

        class Images(StreamingDataset):
            def __getitem__(self, i: int) -> tuple:
                sample = super().__getitem__(i)
                return transform(sample["image"].convert("RGB")), sample["label"]

        return Images(local=local, shuffle=True, batch_size=batch)


def stateful_loader(folder: str, batch: int, workers: int) -> DataLoader:
    from torchdata.stateful_dataloader import StatefulDataLoader
    from torchvision.datasets import ImageFolder

    return StatefulDataLoader(
        ImageFolder(folder, transform=TRANSFORM),
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        persistent_workers=True,
    )


def timed_run(make: Callable[[], Any], batches: int) -> float:
    """images/s of one pass of ``batches`` batches after one warm-up batch."""
    iterator = iter(make())
    next(iterator)
    images, watch = 0, Stopwatch()
    for _ in range(batches):
        try:
            b = next(iterator)
        except StopIteration:
            break
        images += len(b[0])
    return images / (watch.elapsed)


def decode_ceiling(folder: str, count: int = 100, repeats: int = 3) -> dict[str, float]:
    """ms per image on one core of each side's per-image work over ``count`` files: the peers' (PIL decode, Resize,
    ToTensor, Normalize: `TRANSFORM`) and v5's (simplejpeg's DCT-scaled decode to the same size, then normalised). Their
    ratio is the most v5 can gain over a PIL peer from its decode, whatever the loader around it."""
    from labkit.decode.registry import decode_image
    from labkit.device.transfer import normalize_uint8
    from labkit.workers.thread_budget import torch_threads

    blobs = [open(path, "rb").read() for path, _ in samples(folder)[:count]]
    steps = {
        "peer": lambda data: TRANSFORM(Image.open(io.BytesIO(data)).convert("RGB")),
        "v5": lambda data: normalize_uint8(decode_image(data, OUTPUT_SIZE, "simplejpeg")),
    }
    with torch_threads(1):
        return {
            name: time_calls(lambda step=step: [step(data) for data in blobs], repeats, warmup=1).median
            / len(blobs)
            * 1000
            for name, step in steps.items()
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    out = result_path("peers", quick, args.json)
    ws = prepare(args.data, quick=quick, progress=False)
    workers, batch = usable_cpus(), 64
    batches = 3 if quick else 15
    stores = os.path.join(ws.work, os.path.basename(os.path.abspath(ws.folder)))  # beside the packs, not the data
    shards = write_tar_shards(ws.folder, f"{stores}-wds", shards_wanted=4 * workers)
    write_mds(ws.folder, f"{stores}-mds")
    settings = AblationSettings(batch_size=batch, num_workers=workers)
    versions = {v.id: v for v in VERSIONS}

    def labkit(vid: str, decoder: str) -> Callable[[], Any]:
        version = dataclasses.replace(versions[vid], mix="none")  # the peers do not mix: neither do we here

        def make() -> Any:
            loader, _ = build_loader(version, ws, settings, decoder)
            return device_batches(version, loader, settings, len(ws.classes))

        return make

    mds = _MDSImages.build(f"{ws.folder}-mds", batch)
    contenders: dict[str, Callable[[], Any]] = {
        "webdataset": lambda: webdataset_loader(shards, batch, workers),
        "mosaicml-streaming": lambda: DataLoader(mds, batch_size=batch, num_workers=workers),
        "torchdata-stateful": lambda: stateful_loader(ws.folder, batch, workers),
        "labkit v5": labkit("v5", "simplejpeg"),  # the fastest decoder every install has
        "labkit v6": labkit("v6", "none"),
    }
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.runs):
        for name, make in contenders.items():
            rates[name].append(timed_run(make, batches))
    median = {k: statistics.median(v) for k, v in rates.items()}
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    print(
        f"{ws.count} images -> {OUTPUT_SIZE}x{OUTPUT_SIZE} normalised float, batch {batch}, {workers} workers, "
        f"median of {args.runs} alternating runs of {batches} batches"
    )
    peers = [k for k in median if not k.startswith("labkit")]
    best_peer = max(peers, key=median.get)
    for name, value in median.items():
        print(f"  {name:<22}{value:9.1f} images/s")
    for ours in ("labkit v5", "labkit v6"):
        print(
            f"  {ours} / best peer ({best_peer}): {median[ours] / median[best_peer]:.2f}x; "
            + ", ".join(f"/ {p}: {median[ours] / median[p]:.2f}x" for p in peers)
        )
    verdict = judge(f"labkit v5 against the best peer ({best_peer})", rates[best_peer], rates["labkit v5"], goal=3.0)
    print(f"  {verdict}")
    ceiling = decode_ceiling(ws.folder)
    most = ceiling["peer"] / ceiling["v5"]
    reached = median["labkit v5"] / median[best_peer] / most
    print(
        f"  one core, ms per image: a peer's PIL decode + Resize + Normalize {ceiling['peer']:.2f}, v5's simplejpeg "
        f"decode + normalise {ceiling['v5']:.2f}: the most v5 gains from its decode is {most:.2f}x; the loaders "
        f"measured reach {reached:.0%} of that"
        + (", so the 3x goal is out of reach on these images" if most < 3 else "")
    )
    write_result(
        out,
        {
            "machine": info,
            "images": ws.count,
            "workers": workers,
            "batch": batch,
            "batches": batches,
            "images_per_s": rates,
            "median_images_per_s": median,
            "best_peer": best_peer,
            "verdicts": [str(verdict)],
            "one_core_ms_per_image": ceiling,
            "decode_ceiling": most,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
