#!/usr/bin/env python3
"""The resize after a scaled decode, chosen by measurement: each candidate's time on one core and its fidelity.

For each image of a set: its ``RandomResizedCrop(224)`` box (seed 0, epoch 0), the image decoded by simplejpeg at
the DCT scale labkit picks for that box, and the box cut from those pixels as labkit cuts it
(`labkit.decode.crop_box.CropBox.scaled`). Then every candidate resizes that same region to 224x224, timed on one
core (the median of ``--repeats`` passes over the set), and its fidelity is the PSNR against Pillow's antialiased
``resize`` (BILINEAR) of the same region:

* ``torch antialiased``: `labkit.decode.resize.resize_uint8`, what labkit runs;
* ``torch bilinear``: ``F.interpolate`` without antialiasing, through float;
* ``Pillow``: the reference itself (its PSNR is infinite; its time is what a Pillow pipeline pays);
* ``OpenCV INTER_LINEAR``, ``OpenCV INTER_AREA``: where ``cv2`` imports (``pip install opencv-python-headless``).

Two sets, as ``train_pipeline.py --small`` measures them: the kit's 800x600 photos (most boxes are reduced
by the DCT scale, then downscaled) and the 160x120 set (every crop an upscale). The rule it prints: the fastest
candidate whose median PSNR is at least `FIDELITY_DB`; whether that is the one labkit runs is the verdict.

    python benchmarks/resize_candidates.py          # ~2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PIL import Image

from labkit.core.environment import quick_mode
from labkit.core.machine import describe_machine, machine_info
from labkit.core.timing import time_calls
from labkit.decode.crop_box import reduction_for
from labkit.decode.jpeg_orientation import rotates
from labkit.decode.random_crop import RandomResizedCrop
from labkit.decode.resize import chw_view, psnr, resize_uint8
from labkit.decode.simplejpeg_decoder import as_displayed, decode_scaled, simplejpeg_header
from labkit.harness.synthetic_data import make_photos
from labkit.harness.workspace import data_root, prepare
from labkit.measure.result_files import result_path, write_result
from labkit.storage.pack_format import PackReader
from labkit.workers.thread_budget import torch_threads

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_pipeline import OUT, SMALL  # noqa: E402  (the sizes the training loaders are measured at)

#: The least median PSNR against Pillow's antialiased resize a candidate needs to be chosen.
FIDELITY_DB = 50.0
#: The candidate labkit runs.
LABKIT = "torch antialiased"

Region = np.ndarray  # H×W×3 uint8, C-contiguous


def regions(pack: str, count: int) -> list[Region]:
    """The first ``count`` images' crop regions, decoded and cut as labkit's crop path does."""
    crop, reader = RandomResizedCrop(OUT, seed=0), PackReader(pack)
    found = []
    for index in range(min(count, len(reader))):
        data = reader.read(index)
        header = simplejpeg_header(data)
        if header is None:
            continue
        height, width, orientation = header
        box = crop.draw(*((width, height) if rotates(orientation) else (height, width)), index)
        scale = reduction_for(box.height, box.width, crop.output_hw)
        pixels = as_displayed(decode_scaled(data, height, width, scale), orientation)
        top, left, bottom, right = box.scaled(pixels.shape[:2])
        found.append(np.ascontiguousarray(pixels[top:bottom, left:right]))
    return found


def candidates() -> dict[str, Callable[[Region], np.ndarray]]:
    """Each candidate: an H×W×3 region → the 224×224×3 uint8 resize."""
    hw = (OUT, OUT)

    def torch_aa(region: Region) -> np.ndarray:
        return resize_uint8(chw_view(region), hw).permute(1, 2, 0).numpy()

    def torch_plain(region: Region) -> np.ndarray:
        batch = chw_view(region).unsqueeze(0).float()
        out = torch.nn.functional.interpolate(batch, size=hw, mode="bilinear", antialias=False, align_corners=False)
        return out.round_().clamp_(0, 255).to(torch.uint8)[0].permute(1, 2, 0).numpy()

    found = {LABKIT: torch_aa, "torch bilinear": torch_plain, "Pillow": pillow}
    try:
        import cv2
    except ImportError:
        return found
    cv2.setNumThreads(1)
    found["OpenCV INTER_LINEAR"] = lambda region: cv2.resize(region, (OUT, OUT), interpolation=cv2.INTER_LINEAR)
    found["OpenCV INTER_AREA"] = lambda region: cv2.resize(region, (OUT, OUT), interpolation=cv2.INTER_AREA)
    return found


def pillow(region: Region) -> np.ndarray:
    """Pillow's antialiased bilinear resize: the reference every candidate's fidelity is measured against."""
    return np.asarray(Image.fromarray(region).resize((OUT, OUT), Image.BILINEAR))


def measure_set(found: list[Region], repeats: int) -> dict[str, Any]:
    """ms per region and PSNR against Pillow (median, lowest) for every candidate, on one core."""
    references = [torch.from_numpy(pillow(region).copy()) for region in found]
    upscales = sum(region.shape[0] < OUT or region.shape[1] < OUT for region in found) / len(found)
    rows = {}
    with torch_threads(1):
        for name, resize in candidates().items():
            passes = time_calls(lambda resize=resize: [resize(region) for region in found], repeats, warmup=1)
            scores = [
                psnr(torch.from_numpy(np.ascontiguousarray(resize(region))), reference)
                for region, reference in zip(found, references)
            ]
            rows[name] = {
                "ms_per_image": passes.median / len(found) * 1000,
                "psnr_median_db": statistics.median(scores),
                "psnr_lowest_db": min(scores),
            }
    chosen = min(
        (name for name, row in rows.items() if row["psnr_median_db"] >= FIDELITY_DB),
        key=lambda name: rows[name]["ms_per_image"],
    )
    return {"regions": len(found), "upscale_share": upscales, "candidates": rows, "fastest_at_fidelity": chosen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200, help="images per set")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    quick = quick_mode()
    out = result_path("resize_candidates", quick, args.json)
    ws = prepare(None, quick=quick, progress=False, recheck=False)
    folder = os.path.join(data_root(), "photos-160x120")
    make_photos(folder, SMALL, progress=False)
    small = prepare(folder, quick=True, progress=False, recheck=False)
    info = machine_info()
    print(f"Machine: {describe_machine(info)}")
    print(
        f"each region resized to {OUT}x{OUT} on one core; fidelity: PSNR against Pillow's antialiased resize; "
        f"chosen: the fastest at >= {FIDELITY_DB:.0f} dB (median)"
    )
    results: dict[str, Any] = {"machine": info, "output": OUT, "fidelity_db": FIDELITY_DB, "sets": {}}
    for label, pack in ((f"{ws.count} photos of 800x600", ws.pack), (f"{small.count} photos of 160x120", small.pack)):
        measured = results["sets"][label] = measure_set(regions(pack, 32 if quick else args.images), args.repeats)
        print(f"{label}: {measured['regions']} crop regions, {measured['upscale_share']:.0%} of them upscaled")
        for name, row in measured["candidates"].items():
            print(
                f"  {name:<22}{row['ms_per_image']:7.3f} ms  PSNR {row['psnr_median_db']:6.1f} dB median, "
                f"{row['psnr_lowest_db']:6.1f} lowest"
            )
        chosen, ours = measured["fastest_at_fidelity"], measured["candidates"][LABKIT]
        if chosen == LABKIT:
            print(f"  labkit's resize ({LABKIT}) is the fastest candidate at >= {FIDELITY_DB:.0f} dB here")
        else:
            row = measured["candidates"][chosen]
            print(
                f"  {chosen} is faster than labkit's resize at >= {FIDELITY_DB:.0f} dB here: {row['ms_per_image']:.3f}"
                f" against {ours['ms_per_image']:.3f} ms ({ours['ms_per_image'] / row['ms_per_image']:.2f}x)"
            )
    write_result(out, results)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
