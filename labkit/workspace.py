"""The files a measurement runs on: an ImageFolder, its pack and its decoded pack, made and checked.

`prepare` makes the photo-like data set if the folder is missing, packs it (again, if the
folder changed since), and verifies both packs, so every command that measures starts from
sound files — and a user's own ImageFolder goes through exactly the same steps.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional

from labkit.folders import scan_image_folder
from labkit.packfile import PackError, PackReader, verify_pack
from labkit.packing import pack_folder
from labkit.settings import quick_mode
from labkit.synthetic import QUICK_COUNT, PhotoSpec, make_photos

OUTPUT_SIZE = 256
DATA_ENV = "LABKIT_DATA"


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
            progress: bool = True, recheck: bool = True) -> Workspace:
    """Make (if missing) → pack (if stale) → verify; print each step; return the three paths.

    A pack just written always has every checksum verified. ``recheck=False`` skips re-reading
    the checksums of a pack found up to date (its header and index are still checked): the
    notebooks' choice, since the datasets check each record's checksum as they read it anyway.
    """
    folder = folder.rstrip(os.sep)
    if not os.path.isdir(folder):
        n = QUICK_COUNT if quick else PhotoSpec().n
        print(f"[data] making {n} photo-like images in {folder}")
        print(make_photos(folder, PhotoSpec(n=n), progress=progress))
    index = scan_image_folder(folder)
    mtime = _newest_mtime(folder)
    pack, decoded = f"{folder}.pack", f"{folder}-{size}.pack"
    written = []
    for path, decoded_size in ((pack, None), (decoded, size)):
        if _pack_is_current(path, len(index), mtime):
            print(f"[pack] {path} is up to date")
        else:
            print(f"[pack] {folder} -> {path}")
            print(pack_folder(folder, path, decoded_size=decoded_size, progress=progress))
            written.append(path)
    for path in (pack, decoded):
        if recheck or path in written:
            print(f"[verify] {verify_pack(path, progress=progress)}")
    return Workspace(folder, pack, decoded, index.classes, len(index))


def data_root() -> str:
    """The one folder every notebook and command keeps its data in.

    ``LABKIT_DATA`` when set; else ``data/`` at the top of the clone labkit runs from (found from
    the package's own location, so a notebook finds it whatever its working directory); else, for
    an installed labkit, ``~/.cache/labkit``.
    """
    configured = os.environ.get(DATA_ENV)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    clone = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.exists(os.path.join(clone, "pyproject.toml")):
        return os.path.join(clone, "data")
    return os.path.join(os.path.expanduser("~"), ".cache", "labkit")


def course_workspace(quick: Optional[bool] = None, progress: bool = True) -> Workspace:
    """The notebooks' data: made on first use in `data_root`, reused after.

    Quick mode (``LABKIT_QUICK``, on when unset) keeps 256 images in ``photos-quick``; full mode
    keeps the full set in ``photos``, so switching modes never mixes the two. What it prints names
    files relative to `data_root`, so a notebook's stored output shows no machine's paths.
    """
    quick = quick_mode(default=True) if quick is None else quick
    root = data_root()
    os.makedirs(root, exist_ok=True)
    previous = os.getcwd()
    os.chdir(root)  # so what it prints names files relative to the data folder, not this machine's paths
    try:
        ws = prepare("photos-quick" if quick else "photos", quick=quick, progress=progress, recheck=False)
    finally:
        os.chdir(previous)
    return Workspace(*(os.path.join(root, p) for p in (ws.folder, ws.pack, ws.decoded_pack)), ws.classes, ws.count)
