"""The kit's main job (``labkit demo``, run by ``make demo``): make the data set if missing, pack
it, verify the packs, and measure images/s for every storage × decoder on this machine."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from torch.utils.data import DataLoader

from labkit.datasets import DecodedArrayDataset, ImageFolderDataset, LabeledImageDataset, PackedDataset
from labkit.decode import DECODERS
from labkit.measure import Throughput, describe_machine, machine_info, measure_loader
from labkit.packfile import verify_pack
from labkit.packing import pack_folder
from labkit.settings import usable_cpus
from labkit.synthetic import MANIFEST_NAME, QUICK_COUNT, PhotoSpec, make_photos

OUTPUT_SIZE = 256


@dataclass
class DemoRow:
    storage: str
    decoder: str
    result: Throughput


def _loader(dataset: LabeledImageDataset, batch_size: int, workers: int) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      persistent_workers=workers > 0)


def format_table(rows: List[DemoRow], info: Dict[str, Any], settings: Dict[str, Any]) -> str:
    """The images/s table, fastest relative to the first row (folder + PIL, the seed's baseline)."""
    base = rows[0].result.images_per_s
    lines = [f"Machine: {describe_machine(info)}",
             f"Data: {settings['images']} images -> {OUTPUT_SIZE}x{OUTPUT_SIZE}, batch {settings['batch_size']}, "
             f"{settings['workers']} workers, median of {settings['runs']} epochs after 1 warm-up",
             "",
             f"{'storage':<22}{'decoder':<14}{'images/s':>10}{'ms/batch':>10}{'vs first':>10}",
             "-" * 66]
    for r in rows:
        lines.append(f"{r.storage:<22}{r.decoder:<14}{r.result.images_per_s:>10.1f}"
                     f"{r.result.step_s * 1000:>10.1f}{r.result.images_per_s / base:>9.2f}x")
    return "\n".join(lines)


def run_demo(data: str = "data/photos", quick: bool = True, batch_size: int = 64, workers: Optional[int] = None,
             runs: int = 3, json_path: Optional[str] = None, progress: bool = True) -> List[DemoRow]:
    """Make → pack → verify → measure; print each step and the table, return the rows."""
    data = data.rstrip(os.sep)
    if not os.path.exists(os.path.join(data, MANIFEST_NAME)):
        n = QUICK_COUNT if quick else PhotoSpec().n
        print(f"[1/4] making {n} photo-like images in {data}")
        print(make_photos(data, PhotoSpec(n=n), progress=progress))
    else:
        print(f"[1/4] using the data set in {data}")
    packed, decoded = f"{data}.pack", f"{data}-{OUTPUT_SIZE}.pack"
    print(f"[2/4] packing {data}")
    print(pack_folder(data, packed, progress=progress))
    print(pack_folder(data, decoded, decoded_size=OUTPUT_SIZE, progress=progress))
    print("[3/4] verifying the packs")
    for path in (packed, decoded):
        print(verify_pack(path, progress=progress))

    workers = usable_cpus() if workers is None else workers
    candidates = [("folder (files)", name, lambda d=name: ImageFolderDataset(data, d, OUTPUT_SIZE))
                  for name in DECODERS]
    candidates += [("pack (mmap)", name, lambda d=name: PackedDataset(packed, d, OUTPUT_SIZE)) for name in DECODERS]
    candidates.append(("decoded pack (mmap)", "none", lambda: DecodedArrayDataset(decoded)))
    print(f"[4/4] measuring {len(candidates)} storage x decoder combinations")
    rows: List[DemoRow] = []
    images = 0
    for storage, decoder, make in candidates:
        dataset = make()
        images = len(dataset)
        rows.append(DemoRow(storage, decoder, measure_loader(_loader(dataset, batch_size, workers), runs=runs)))
        if progress:
            print(f"  {storage:<22}{decoder:<14}{rows[-1].result.images_per_s:8.1f} images/s")
    info = machine_info()
    settings = {"images": images, "batch_size": batch_size, "workers": workers, "runs": runs,
                "size": OUTPUT_SIZE, "quick": quick}
    print()
    print(format_table(rows, info, settings))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump({"machine": info, "settings": settings,
                       "rows": [{"storage": r.storage, "decoder": r.decoder, **r.result.to_dict()} for r in rows]},
                      f, indent=1)
        print(f"wrote {json_path}")
    return rows
