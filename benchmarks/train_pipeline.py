#!/usr/bin/env python3
"""Training loaders side by side: random-resized crop 224 + horizontal flip, batch 64, uint8 out.

Contenders, on the same photos with the same workers (``--data DIR`` for any ImageFolder, else the kit's
photo-like 800x600 JPEGs; ``--small`` adds a 160x120 set, where every crop is an upscale):
* ``torchvision``: ``ImageFolder`` + ``v2.RandomResizedCrop(224)`` + flip after a full PIL decode, the
  pipeline every tutorial shows;
* ``labkit folder`` / ``labkit pack``: `labkit.decode.random_crop.RandomResizedCrop` inside the
  ``pil-reduced`` decode, from the folder and from its pack;
* ``workers crop 256->224`` against ``device crop 256->224``: images decoded to 256x256 in the workers, then
  each sample cropped in the workers (per sample) or by `labkit.device.batch_augment.BatchRandomResizedCrop`
  on the batch in the main process (here the "device" is the CPU; on a GPU the same code runs there), both
  ending normalised float;
* peers, where they import (``pip install -e ".[peers]"``): WebDataset and MosaicML Streaming with the
  torchvision training transform in their workers; one that does not import is reported with the exact
  error (FFCV, DALI and LitData's own pipelines are not in this version).
Runs alternate between contenders; each run is a fresh loader, one warm-up batch, then ``--batches``
batches; the median of ``--runs`` is reported with each ratio. JSON and PNG go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Callable, Dict, List, Optional

import torch
from torch.utils.data import DataLoader, RandomSampler

from labkit.collate.collate_fns import stack_uint8
from labkit.core.environment import quick_mode, usable_cpus
from labkit.course.synthetic_data import PhotoSpec, make_photos
from labkit.course.workspace import data_root, derived_folder, prepare
from labkit.datasets.map_style import DecodedArrayDataset, ImageFolderDataset, PackedDataset
from labkit.decode.random_crop import RandomResizedCrop, crop_resize_flip
from labkit.device.batch_augment import BatchRandomResizedCrop
from labkit.device.transfer import normalize_uint8
from labkit.measure.loader_timing import describe_machine, machine_info
from labkit.samplers.epoch_tagged import EpochTagged

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import timed_run  # noqa: E402  (the benchmarks share one timing loop)

OUT = 224
BATCH = 64
SMALL = PhotoSpec(n=512, width=160, height=120, seed=3)
PEERS = ("ffcv", "nvidia-dali", "litdata", "webdataset", "mosaicml-streaming")


def training_transform() -> Callable[[Any], torch.Tensor]:
    """What every tutorial shows, on a PIL image: uint8 tensor, random-resized crop, flip."""
    from torchvision.transforms import v2

    return v2.Compose([v2.PILToTensor(), v2.RandomResizedCrop(OUT, antialias=True), v2.RandomHorizontalFlip()])


def torchvision_loader(folder: str, workers: int) -> DataLoader:
    from torchvision.datasets import ImageFolder

    return DataLoader(ImageFolder(folder, transform=training_transform()), batch_size=BATCH, shuffle=True,
                      num_workers=workers)


def peer_loaders(folder: str, workers: int) -> Dict[str, Callable[[], Any]]:
    """WebDataset and MosaicML Streaming, each with the training transform in its workers, where they import.

    Their shards are written once per run where the kit keeps what it derives from ``folder`` (never beside
    a user's folder); MDS stores the images re-encoded by PIL, as its ``jpeg`` column does.
    """
    from peers import _MDSImages, webdataset_loader, write_mds, write_tar_shards

    place = derived_folder(folder, None)
    name = os.path.basename(os.path.abspath(folder))
    found: Dict[str, Callable[[], Any]] = {}
    if peer_status()["webdataset"] == "imports":
        shards = write_tar_shards(folder, os.path.join(place, f"{name}-wds"), shards_wanted=4 * workers)
        found["webdataset"] = lambda: webdataset_loader(shards, BATCH, workers, training_transform())
    if peer_status()["mosaicml-streaming"] == "imports":
        write_mds(folder, os.path.join(place, f"{name}-mds"))
        mds = _MDSImages.build(os.path.join(place, f"{name}-mds"), BATCH, training_transform())
        found["mosaicml-streaming"] = lambda: DataLoader(mds, batch_size=BATCH, num_workers=workers)
    return found


def labkit_loader(dataset: Any, workers: int) -> DataLoader:
    return DataLoader(dataset, batch_size=BATCH, sampler=EpochTagged(RandomSampler(dataset)), num_workers=workers,
                      collate_fn=stack_uint8)


class CropInWorkers:
    """`DecodedArrayDataset`'s 256x256 samples, each cropped to 224 in the worker (the per-sample baseline)."""

    def __init__(self, pack: str) -> None:
        self.dataset, self.crop = DecodedArrayDataset(pack), RandomResizedCrop(OUT)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        image, label = self.dataset[index]
        box = self.crop.draw(*image.shape[-2:], int(index))
        return crop_resize_flip(image, box, (OUT, OUT)), label


def normalised(loader: DataLoader) -> Any:
    for images, labels in loader:
        yield normalize_uint8(images), labels


def device_cropped(loader: DataLoader) -> Any:
    augment = BatchRandomResizedCrop(OUT)
    for step, (images, labels) in enumerate(loader):
        yield augment(images, keys=range(step * BATCH, step * BATCH + len(images))), labels


def peer_status() -> Dict[str, str]:
    """Whether each peer imports here, or the exact error that keeps it out."""
    found: Dict[str, Any] = {}
    for name, module in zip(PEERS, ("ffcv", "nvidia.dali", "litdata", "webdataset", "streaming")):
        try:
            __import__(module)
        except Exception as e:  # the exact error is the result
            found[name] = f"{type(e).__name__}: {e}"
        else:
            found[name] = "imports"
    return found


def run_set(label: str, folder: str, pack: str, decoded: str, workers: int, runs: int,
            batches: int) -> Dict[str, Any]:
    crop = RandomResizedCrop(OUT)
    contenders: Dict[str, Callable[[], Any]] = {
        "torchvision": lambda: torchvision_loader(folder, workers),
        "labkit folder": lambda: labkit_loader(ImageFolderDataset(folder, "pil-reduced", crop=crop), workers),
        "labkit pack": lambda: labkit_loader(PackedDataset(pack, "pil-reduced", crop=crop), workers),
        "workers crop 256->224": lambda: normalised(DataLoader(CropInWorkers(decoded), batch_size=BATCH,
                                                               shuffle=True, num_workers=workers)),
        "device crop 256->224": lambda: device_cropped(DataLoader(DecodedArrayDataset(decoded), batch_size=BATCH,
                                                                  shuffle=True, num_workers=workers,
                                                                  collate_fn=stack_uint8)),
    }
    contenders.update(peer_loaders(folder, workers))
    rates: Dict[str, List[float]] = {name: [] for name in contenders}
    from tqdm.auto import tqdm

    with tqdm(total=runs * len(contenders), desc=label, unit="run", file=sys.stderr) as bar:
        for _ in range(runs):
            for name, make in contenders.items():
                rates[name].append(timed_run(make, batches))
                bar.update()
    median = {k: statistics.median(v) for k, v in rates.items()}
    peers = [k for k in median if k in PEERS]
    best = {f"labkit pack / {max(peers, key=median.get)} (best peer)":
            median["labkit pack"] / max(median[p] for p in peers)} if peers else {}
    return {"images_per_s": rates, "median_images_per_s": median,
            "ratios": {**best, "labkit folder / torchvision": median["labkit folder"] / median["torchvision"],
                       "labkit pack / torchvision": median["labkit pack"] / median["torchvision"],
                       "device crop / workers crop": median["device crop 256->224"] / median["workers crop 256->224"]}}


def plot(results: Dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(results["sets"])
    fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 3.5), squeeze=False)
    for ax, name in zip(axes[0], sets):
        median = results["sets"][name]["median_images_per_s"]
        ax.barh(list(median), list(median.values()), color="tab:blue")
        ax.set_xlabel("images/s (median)")
        ax.set_title(name)
        ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--quick", action="store_true", help="fewer runs and batches (under 3 minutes)")
    parser.add_argument("--small", action="store_true", help="also measure 160x120 photos")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--batches", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    quick = args.quick or quick_mode()
    runs, batches = args.runs or (3 if quick else 5), args.batches or (2 if quick else 10)
    workers = usable_cpus()
    torch.manual_seed(0)
    sets = {}
    default = os.path.join(data_root(), "photos-quick" if quick else "photos")  # the course's own sets
    ws = prepare(args.data or default, quick=quick, progress=False, recheck=False)
    sets[f"{ws.count} photos of {args.data or '800x600'}"] = (ws.folder, ws.pack, ws.decoded_pack)
    if args.small:
        folder = os.path.join(data_root(), "photos-160x120")
        make_photos(folder, SMALL, progress=False)
        small = prepare(folder, quick=True, progress=False, recheck=False)
        sets[f"{small.count} photos of 160x120"] = (small.folder, small.pack, small.decoded_pack)
    info = machine_info()
    results: Dict[str, Any] = {"machine": info, "workers": workers, "batch": BATCH, "output": OUT, "runs": runs,
                               "batches": batches, "sets": {}, "peers": peer_status()}
    print(f"Machine: {describe_machine(info)}")
    print(f"RandomResizedCrop({OUT}) + flip, batch {BATCH}, {workers} workers, median of {runs} alternating runs "
          f"of {batches} batches")
    for label, (folder, pack, decoded) in sets.items():
        results["sets"][label] = measured = run_set(label, folder, pack, decoded, workers, runs, batches)
        print(label)
        for name, value in measured["median_images_per_s"].items():
            spread = measured["images_per_s"][name]
            print(f"  {name:<24}{value:9.1f} images/s  (runs {min(spread):.1f}-{max(spread):.1f})")
        for name, ratio in measured["ratios"].items():
            print(f"  {name}: {ratio:.2f}x")
    for name, status in results["peers"].items():
        print(f"  peer {name}: {status}")
    stem = f"train_pipeline_{info['cpu_count']}cpu{'_quick' if quick else ''}"
    out = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{stem}.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    plot(results, os.path.splitext(out)[0] + ".png")
    print(f"wrote {out} and its .png")


if __name__ == "__main__":
    main()
