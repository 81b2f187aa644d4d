#!/usr/bin/env python3
"""Training loaders side by side: random-resized crop 224 + horizontal flip, batch 64, uint8 out.

Contenders, on the same photos with the same workers (``--data DIR`` for any ImageFolder, else the kit's
photo-like 800x600 JPEGs; ``--small`` adds a 160x120 set, where every crop is an upscale):
* ``torchvision``: ``ImageFolder`` + ``v2.RandomResizedCrop(224)`` + flip after a full PIL decode, the
  pipeline every tutorial shows;
* ``torchvision decode_jpeg``: the plain torch pipeline written with care: ``torchvision.io.decode_jpeg`` on
  the file's bytes, then ``v2.RandomResizedCrop(224)`` + flip on the uint8 tensor, in a DataLoader;
* ``labkit folder`` / ``labkit pack``: `labkit.decode.random_crop.RandomResizedCrop` inside the simplejpeg
  decoder's DCT-scaled decode (the fastest every install has), each batch decoded
  into one tensor by the batch engine (`labkit.datasets.batch_decode`), from the folder and from its pack, in
  `labkit.workers.loader_factory.make_loader`'s loader; ``labkit pack slots`` the same with ``batch_slots=True``
  (workers write into reused shared memory); ``labkit pack threads`` the same with no worker processes at all
  (`labkit.workers.thread_loader.ThreadLoader`: every core's thread decodes in the main process);
  ``labkit pack pil-reduced`` the previous engine (Pillow's DCT-scaled decode, one sample at a time);
  ``labkit pack turbojpeg`` the TurboJPEG 3 region decode, where a libturbojpeg 3 loads (``LABKIT_TURBOJPEG``);
* ``workers crop 256->224`` against ``device crop 256->224``: images decoded to 256x256 in the workers, then
  each sample cropped in the workers (per sample) or by `labkit.device.batch_augment.BatchRandomResizedCrop`
  on the batch in the main process (here the "device" is the CPU; on a GPU the same code runs there), both
  ending normalised float;
* ``labkit pack torchcodec``: the same crops after a full decode by the ``torchcodec`` decoder (a decoder that
  cannot crop in its decode falls back to that), where torchcodec is installed;
* peers, where they import (``scripts/install_peers.sh``, and benchmarks/train_peers.py for FFCV, DALI, SPDL and
  LitData): WebDataset and MosaicML Streaming with the torchvision training transform in their workers, FFCV,
  DALI, SPDL and LitData with their own training pipelines (SPDL's a pool of threads: the thread pipeline
  labkit's ``ThreadLoader`` answers); one that does not import is reported with the exact error.
Runs alternate between contenders; each run is a fresh process (a peer's threads cannot outlive its run) with a fresh
loader, one warm-up batch, then ``--batches`` batches; the median of ``--runs`` is reported with each ratio and its
verdict (`labkit.measure.verdict`). Before the loaders, one process times each step per image on one core
(`decode_floor`): what a full decode, a 1/8-scale decode, the baseline and the crop-in-decode cost, which bounds what
any DCT-scaled decode can gain here. JSON and PNG go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader

from labkit.collate.batching import stack_uint8
from labkit.core.environment import quick_mode, usable_cpus
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import time_calls
from labkit.datasets.encoded_images import ImageFolderDataset
from labkit.datasets.pack_datasets import DecodedArrayDataset, PackedDataset
from labkit.decode.crop_box import crop_resize_flip, dct_scale
from labkit.decode.pil_crop import displayed_hw
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.registry import DECODERS
from labkit.device.batch_augment import BatchRandomResizedCrop
from labkit.device.transfer import normalize_uint8
from labkit.harness.synthetic_data import PhotoSpec, make_photos
from labkit.harness.workspace import data_root, derived_folder, prepare
from labkit.measure.result_files import result_path, write_result
from labkit.measure.verdict import judge
from labkit.workers.loader_factory import make_loader
from labkit.workers.thread_loader import ThreadLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_peers  # noqa: E402
from peers import samples, timed_run  # noqa: E402  (the benchmarks share one timing loop and folder listing)

OUT = 224
BATCH = 64
SMALL = PhotoSpec(n=512, width=160, height=120, seed=3)
PEERS = ("ffcv", "nvidia-dali", "spdl", "litdata", "webdataset", "mosaicml-streaming")
OVERHEAD_GOAL_MS = 0.3
#: The decoder of labkit's contenders: the fastest that every install has and CI tests (the region decoder,
#: where a libturbojpeg 3 loads, is measured in its own row).
ENGINE = "simplejpeg"
LABKIT = ("labkit folder", "labkit pack", "labkit pack slots", "labkit pack threads")


def training_transform() -> Callable[[Any], torch.Tensor]:
    """What every tutorial shows, on a PIL image: uint8 tensor, random-resized crop, flip."""
    from torchvision.transforms import v2

    return v2.Compose([v2.PILToTensor(), v2.RandomResizedCrop(OUT, antialias=True), v2.RandomHorizontalFlip()])


def torchvision_loader(folder: str, workers: int) -> DataLoader:
    from torchvision.datasets import ImageFolder

    return DataLoader(
        ImageFolder(folder, transform=training_transform()), batch_size=BATCH, shuffle=True, num_workers=workers
    )


class DecodeJpegFolder:
    """The files of an ImageFolder decoded by ``torchvision.io.decode_jpeg`` straight into a uint8 tensor, then
    ``v2.RandomResizedCrop(224)`` + flip on it: a careful plain-torch training pipeline."""

    def __init__(self, folder: str) -> None:
        from torchvision.transforms import v2

        self.samples = samples(folder)
        self.transform = v2.Compose([v2.RandomResizedCrop(OUT, antialias=True), v2.RandomHorizontalFlip()])

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Any:
        from torchvision.io import ImageReadMode, decode_jpeg, read_file

        path, label = self.samples[index]
        return self.transform(decode_jpeg(read_file(path), mode=ImageReadMode.RGB)), label


def decode_jpeg_loader(folder: str, workers: int) -> DataLoader:
    return DataLoader(DecodeJpegFolder(folder), batch_size=BATCH, shuffle=True, num_workers=workers)


def write_peer_stores(folder: str, workers: int) -> dict[str, Any]:
    """Each importable peer's own store of ``folder``, written once, where the kit keeps what it derives from a
    folder (never beside a user's photos): {peer: its path(s)}. MDS stores the images re-encoded by PIL, as its
    ``jpeg`` column does, FFCV by OpenCV; DALI and SPDL read the folder itself."""
    from peers import write_mds, write_tar_shards

    place = derived_folder(folder, None)
    name = os.path.basename(os.path.abspath(folder))
    status = peer_status()
    stores: dict[str, Any] = {}
    if status["ffcv"] == "imports":
        stores["ffcv"] = train_peers.write_beton(folder, os.path.join(place, f"{name}.beton"), workers)
    if status["nvidia-dali"] == "imports":
        stores["nvidia-dali"] = folder
    if status["spdl"] == "imports":
        stores["spdl"] = folder
    if status["litdata"] == "imports":
        stores["litdata"] = train_peers.write_litdata(folder, os.path.join(place, f"{name}-litdata"), workers)
    if status["webdataset"] == "imports":
        stores["webdataset"] = write_tar_shards(folder, os.path.join(place, f"{name}-wds"), shards_wanted=4 * workers)
    if status["mosaicml-streaming"] == "imports":
        stores["mosaicml-streaming"] = os.path.join(place, f"{name}-mds")
        write_mds(folder, stores["mosaicml-streaming"])
    return stores


def peer_loader(name: str, store: Any, workers: int) -> Any:
    """Peer ``name``'s training loader over the store `write_peer_stores` wrote for it."""
    if name == "ffcv":
        return train_peers.ffcv_loader(store, BATCH, workers, OUT)
    if name == "nvidia-dali":
        return train_peers.dali_loader(store, BATCH, workers, OUT)
    if name == "spdl":
        return train_peers.spdl_loader(store, BATCH, workers, OUT)
    if name == "litdata":
        return train_peers.litdata_loader(store, BATCH, workers, training_transform())
    from peers import _MDSImages, webdataset_loader

    if name == "webdataset":
        return webdataset_loader(store, BATCH, workers, training_transform())
    return DataLoader(_MDSImages.build(store, BATCH, training_transform()), batch_size=BATCH, num_workers=workers)


def decode_floor(folder: str, count: int = 100, repeats: int = 3) -> dict[str, float]:
    """Milliseconds per image on one core, the median of ``repeats`` passes over ``count`` files: full decodes (Pillow,
    ``decode_jpeg``, simplejpeg), a 1/8-scale decode (the least a DCT-scaled decode can cost: its entropy
    decoding is never skipped), the two torchvision pipelines, and labkit's crop-in-decode with each decoder
    that crops in its decode, with the share of boxes each DCT scale served."""
    from io import BytesIO

    import simplejpeg
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_jpeg
    from torchvision.transforms import v2

    from labkit.decode.pil_decoders import open_image

    blobs = [open(path, "rb").read() for path, _ in samples(folder)[:count]]
    tensors = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in blobs]
    crop, baseline = RandomResizedCrop(OUT), training_transform()
    careful = v2.Compose([v2.RandomResizedCrop(OUT, antialias=True), v2.RandomHorizontalFlip()])

    def full(i: int, data: bytes) -> None:
        Image.open(BytesIO(data)).load()

    def eighth(i: int, data: bytes) -> None:
        img = Image.open(BytesIO(data))
        img.draft("RGB", (max(1, img.size[0] // 8), max(1, img.size[1] // 8)))
        img.load()

    steps = {
        "full decode (PIL)": full,
        "full decode (decode_jpeg)": lambda i, data: decode_jpeg(tensors[i]),
        "full decode (simplejpeg)": lambda i, data: simplejpeg.decode_jpeg(data, "RGB"),
        "1/8-scale decode (PIL draft)": eighth,
        "torchvision baseline": lambda i, data: baseline(Image.open(BytesIO(data)).convert("RGB")),
        "decode_jpeg + v2.RandomResizedCrop": lambda i, data: careful(decode_jpeg(tensors[i], mode=ImageReadMode.RGB)),
        **{
            f"labkit crop-in-decode ({name})": (lambda i, data, name=name: crop.decode(data, i, decoder=name))
            for name, info in DECODERS.items()
            if info.crops_in_decode
        },
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ms = {}
        for name, step in steps.items():

            def one_pass(step: Callable[[int, bytes], Any] = step) -> None:
                for i, data in enumerate(blobs):
                    step(i, data)

            ms[name] = time_calls(one_pass, repeats).median / len(blobs) * 1000
    finally:
        torch.set_num_threads(threads)
    scales = [dct_scale(crop.draw(*displayed_hw(open_image(data)), i), crop.output_hw) for i, data in enumerate(blobs)]
    return {
        "ms_per_image": ms,
        "dct_scale_share": {f"1/{s}": scales.count(s) / len(scales) for s in sorted(set(scales))},
        "images": len(blobs),
    }


def labkit_loader(dataset: Any, workers: int) -> Any:
    """labkit's loader as an engineer makes it: `make_loader` with process workers."""
    return make_loader(dataset, batch_size=BATCH, num_workers=workers, pin_memory=False)


def slot_loader(dataset: Any, workers: int) -> Any:
    """labkit's loader on a CPU (as ``labkit ablation``'s t5): workers write batches into reused shared memory."""
    return make_loader(dataset, batch_size=BATCH, num_workers=workers, batch_slots=True, pin_memory=False)


def thread_loader(dataset: Any, workers: int) -> Any:
    """labkit's loader with no worker processes: ``workers`` threads of the main process decode each batch."""
    return ThreadLoader(dataset, BATCH, threads=workers, pin_memory=False)


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
        yield augment(images, start=step * BATCH, epoch=0), labels


def peer_status() -> dict[str, str]:
    """Whether each peer imports here, or the exact error that keeps it out."""
    found: dict[str, Any] = {}
    for name, module in zip(PEERS, ("ffcv", "nvidia.dali", "spdl.io", "litdata", "webdataset", "streaming")):
        try:
            __import__(module)
        except Exception as e:  # the exact error is the result
            found[name] = f"{type(e).__name__}: {e}"
        else:
            found[name] = "imports"
    return found


def contenders(
    folder: str, pack: str, decoded: str, workers: int, stores: dict[str, Any]
) -> dict[str, Callable[[], Any]]:
    """Every contender's loader factory, by name."""
    crop, fastest = RandomResizedCrop(OUT), ENGINE
    found: dict[str, Callable[[], Any]] = {
        "torchvision": lambda: torchvision_loader(folder, workers),
        "torchvision decode_jpeg": lambda: decode_jpeg_loader(folder, workers),
        "labkit folder": lambda: labkit_loader(ImageFolderDataset(folder, fastest, crop=crop), workers),
        "labkit pack": lambda: labkit_loader(PackedDataset(pack, fastest, crop=crop), workers),
        "labkit pack slots": lambda: slot_loader(PackedDataset(pack, fastest, crop=crop), workers),
        "labkit pack threads": lambda: thread_loader(PackedDataset(pack, fastest, crop=crop), workers),
        "labkit pack pil-reduced": lambda: labkit_loader(PackedDataset(pack, "pil-reduced", crop=crop), workers),
        **(
            {"labkit pack turbojpeg": lambda: labkit_loader(PackedDataset(pack, "turbojpeg", crop=crop), workers)}
            if "turbojpeg" in DECODERS
            else {}
        ),
        **(
            {"labkit pack torchcodec": lambda: labkit_loader(PackedDataset(pack, "torchcodec", crop=crop), workers)}
            if "torchcodec" in DECODERS
            else {}
        ),
        "workers crop 256->224": lambda: normalised(
            DataLoader(CropInWorkers(decoded), batch_size=BATCH, shuffle=True, num_workers=workers)
        ),
        "device crop 256->224": lambda: device_cropped(
            DataLoader(
                DecodedArrayDataset(decoded),
                batch_size=BATCH,
                shuffle=True,
                num_workers=workers,
                collate_fn=stack_uint8,
            )
        ),
    }
    found.update(
        {name: (lambda name=name, store=store: peer_loader(name, store, workers)) for name, store in stores.items()}
    )
    return found


def isolated_run(
    name: str, folder: str, pack: str, decoded: str, workers: int, batches: int, stores: dict[str, Any]
) -> float:
    """images/s of one run of contender ``name`` in a fresh process: threads a peer leaves behind (FFCV's and
    DALI's pipelines run in threads of the process that made them) cannot slow the contenders after it."""
    job = {
        "name": name,
        "folder": folder,
        "pack": pack,
        "decoded": decoded,
        "workers": workers,
        "batches": batches,
        "stores": stores,
    }
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--one", json.dumps(job)], capture_output=True, text=True
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return float(json.loads(lines[-1])["images_per_s"])


def run_one(job: dict[str, Any]) -> None:
    """The child's side of `isolated_run`: one timed run, its rate printed as the last line of JSON."""
    make = contenders(job["folder"], job["pack"], job["decoded"], job["workers"], job["stores"])[job["name"]]
    print(json.dumps({"images_per_s": timed_run(make, job["batches"])}), flush=True)


def run_set(label: str, folder: str, pack: str, decoded: str, workers: int, runs: int, batches: int) -> dict[str, Any]:
    stores = write_peer_stores(folder, workers)
    names = list(contenders(folder, pack, decoded, workers, stores))
    rates: dict[str, list[float]] = {name: [] for name in names}
    from tqdm.auto import tqdm

    with tqdm(total=runs * len(names), desc=label, unit="run", file=sys.stderr) as bar:
        for _ in range(runs):
            for name in names:
                rates[name].append(isolated_run(name, folder, pack, decoded, workers, batches, stores))
                bar.update()
    median = {k: statistics.median(v) for k, v in rates.items()}
    peers = [k for k in median if k in PEERS]
    ours = max(LABKIT, key=median.get)
    verdicts = [
        judge(f"labkit's fastest ({ours}) against the tutorial baseline", rates["torchvision"], rates[ours], goal=2.5),
        judge(
            f"labkit's fastest ({ours}) against decode_jpeg + v2.RandomResizedCrop",
            rates["torchvision decode_jpeg"],
            rates[ours],
            goal=1.3,
        ),
        judge(
            "the batch engine (simplejpeg) against the previous engine (pil-reduced), both packs in a DataLoader",
            rates["labkit pack pil-reduced"],
            rates["labkit pack"],
        ),
        judge("device crop faster than workers crop", rates["workers crop 256->224"], rates["device crop 256->224"]),
    ]
    if peers:
        best = max(peers, key=median.get)
        verdicts.insert(
            2,
            judge(
                f"labkit's fastest ({ours}) against the best peer ({best})",
                rates[best],
                rates[ours],
                min_effect=0.0,
                goal=1.0,
            ),
        )
    floor = decode_floor(folder)
    bare = floor["ms_per_image"][f"labkit crop-in-decode ({ENGINE})"]
    overhead = workers * 1000 / median[ours] - bare  # core-milliseconds a loaded image costs beyond its own decode
    return {
        "images_per_s": rates,
        "median_images_per_s": median,
        "floor": floor,
        "per_image_overhead_ms": overhead,
        "fastest": ours,
        "verdicts": [str(v) for v in verdicts],
    }


def plot(results: dict[str, Any], path: str) -> None:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="an ImageFolder (only read); default: the kit's photos")
    parser.add_argument("--quick", action="store_true", help="fewer runs and batches (under 3 minutes)")
    parser.add_argument("--small", action="store_true", help="also measure 160x120 photos")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--batches", type=int, default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--install-peers",
        action="store_true",
        help="first install FFCV, DALI, LitData, WebDataset and MDS (scripts/install_peers.sh)",
    )
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child of isolated_run
    args = parser.parse_args(argv)
    if args.one:
        return run_one(json.loads(args.one))
    if args.install_peers:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        venv = os.path.dirname(os.path.dirname(sys.executable))
        subprocess.run(
            ["bash", os.path.join(root, "scripts", "install_peers.sh")], check=True, env={**os.environ, "VENV": venv}
        )
    quick = args.quick or quick_mode()
    out = result_path("train_pipeline", quick, args.json)
    runs, batches = args.runs or (2 if quick else 5), args.batches or (2 if quick else 20)
    workers = usable_cpus()
    torch.manual_seed(0)
    sets = {}
    ws = prepare(args.data, quick=quick, progress=False, recheck=False)  # None: the course's own photos
    sets[f"{ws.count} photos of {args.data or '800x600'}"] = (ws.folder, ws.pack, ws.decoded_pack)
    if args.small:
        folder = os.path.join(data_root(), "photos-160x120")
        make_photos(folder, SMALL, progress=False)
        small = prepare(folder, quick=True, progress=False, recheck=False)
        sets[f"{small.count} photos of 160x120"] = (small.folder, small.pack, small.decoded_pack)
    info = machine_info()
    results: dict[str, Any] = {
        "machine": info,
        "workers": workers,
        "batch": BATCH,
        "output": OUT,
        "runs": runs,
        "batches": batches,
        "sets": {},
        "peers": peer_status(),
    }
    print(f"Machine: {describe_machine(info)}")
    print(
        f"RandomResizedCrop({OUT}) + flip, batch {BATCH}, {workers} workers, median of {runs} alternating runs "
        f"of {batches} batches"
    )
    for label, (folder, pack, decoded) in sets.items():
        results["sets"][label] = measured = run_set(label, folder, pack, decoded, workers, runs, batches)
        print(label)
        for name, value in measured["median_images_per_s"].items():
            spread = measured["images_per_s"][name]
            print(f"  {name:<24}{value:9.1f} images/s  (runs {min(spread):.1f}-{max(spread):.1f})")
        for verdict in measured["verdicts"]:
            print(f"  {verdict}")
        floor = measured["floor"]
        print(
            f"  one core, ms per image over {floor['images']} files: "
            + ", ".join(f"{k} {v:.2f}" for k, v in floor["ms_per_image"].items())
        )
        ms = floor["ms_per_image"]
        print(
            f"  a 1/8-scale decode still costs {ms['1/8-scale decode (PIL draft)'] / ms['full decode (PIL)']:.0%} of "
            f"a full one; boxes per DCT scale: "
            + ", ".join(f"{k} {v:.0%}" for k, v in floor["dct_scale_share"].items())
        )
        print(
            f"  {measured['fastest']}: {measured['per_image_overhead_ms']:.2f} ms of core time per image beyond the "
            f"bare crop-in-decode on one core (the goal is under {OVERHEAD_GOAL_MS} ms on 160x120)"
        )
    for name, status in results["peers"].items():
        print(f"  peer {name}: {status}")
    write_result(out, results)
    plot(results, os.path.splitext(out)[0] + ".png")
    print(f"wrote {out} and its .png")


if __name__ == "__main__":
    main()
