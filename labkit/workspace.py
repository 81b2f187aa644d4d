"""The files a measurement runs on: an ImageFolder, its pack and its decoded pack, made and checked.

`prepare` makes the photo-like data set if the folder is missing, packs it (again, if the
folder changed since), and verifies both packs, so every command that measures starts from
sound files — and a user's own ImageFolder goes through exactly the same steps.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List

from labkit.folders import scan_image_folder
from labkit.packfile import PackError, PackReader, verify_pack
from labkit.packing import pack_folder
from labkit.synthetic import QUICK_COUNT, PhotoSpec, make_photos

OUTPUT_SIZE = 256


@dataclass(frozen=True)
class Workspace:
    folder: str
    pack: str
    decoded_pack: str
    classes: List[str]
    count: int


def _newest_mtime(root: str) -> float:
    newest = os.path.getmtime(root)
    for dirpath, _, files in os.walk(root):
        for name in files:
            newest = max(newest, os.path.getmtime(os.path.join(dirpath, name)))
    return newest


def _pack_is_current(pack: str, folder_count: int, folder_mtime: float) -> bool:
    try:
        reader = PackReader(pack)
    except (OSError, PackError):
        return False
    packed = len(reader) + len(reader.meta.get("skipped", []))
    return packed == folder_count and os.path.getmtime(pack) >= folder_mtime


def prepare(folder: str = "data/photos", quick: bool = True, size: int = OUTPUT_SIZE,
            progress: bool = True) -> Workspace:
    """Make (if missing) → pack (if stale) → verify; print each step; return the three paths."""
    folder = folder.rstrip(os.sep)
    if not os.path.isdir(folder):
        n = QUICK_COUNT if quick else PhotoSpec().n
        print(f"[data] making {n} photo-like images in {folder}")
        print(make_photos(folder, PhotoSpec(n=n), progress=progress))
    index = scan_image_folder(folder)
    mtime = _newest_mtime(folder)
    pack, decoded = f"{folder}.pack", f"{folder}-{size}.pack"
    for path, decoded_size in ((pack, None), (decoded, size)):
        if _pack_is_current(path, len(index), mtime):
            print(f"[pack] {path} is up to date")
        else:
            print(f"[pack] {folder} -> {path}")
            print(pack_folder(folder, path, decoded_size=decoded_size, progress=progress))
    for path in (pack, decoded):
        print(f"[verify] {verify_pack(path, progress=progress)}")
    return Workspace(folder, pack, decoded, index.classes, len(index))
