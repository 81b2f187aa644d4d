"""Finding the samples of an ImageFolder tree (``root/<class>/<...>/<file>``).

The same rules as ``torchvision.datasets.ImageFolder`` (classes are the sorted sub-folder
names, files are matched by image extension), with two differences a long-running course
needs: hidden entries such as ``.ipynb_checkpoints`` are ignored, and symlinked folders
inside a class are not followed, so a symlink loop cannot make the scan run forever.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from labkit.core.errors import LabkitFileNotFoundError
from labkit.core.string_table import PathLike, StringTable
from labkit.core.user_paths import require_folder
from labkit.core.wording import first
from labkit.storage.pack_format import is_pack

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp", ".gif")


@dataclass(frozen=True)
class FolderIndex:
    """The samples of one ImageFolder: paths relative to ``root``, their labels and the class names."""

    root: str
    classes: list[str]
    relpaths: StringTable
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.relpaths)

    def abspath(self, i: int) -> str:
        return os.path.join(self.root, self.relpaths[i])


def _visible(name: str) -> bool:
    return not name.startswith(".")


def scan_image_folder(root: PathLike) -> FolderIndex:
    """Index an ImageFolder tree; raise a clear error when it holds no class folder or no image."""
    if os.path.isfile(root) and is_pack(root):
        raise LabkitFileNotFoundError(
            f"{os.fspath(root)} is a labkit pack, not an ImageFolder: open it with "
            "PackedDataset (DecodedArrayDataset for a decoded pack)"
        )
    root = require_folder(root)
    with os.scandir(root) as entries:
        classes = sorted(e.name for e in entries if _visible(e.name) and e.is_dir())
    if not classes:
        raise LabkitFileNotFoundError(
            f"{root}: no class folders. An ImageFolder holds one sub-folder per class, each holding that class's images"
        )
    relpaths: list[str] = []
    labels: list[int] = []
    for label, cls in enumerate(classes):
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, cls), followlinks=False):
            dirnames[:] = [d for d in dirnames if _visible(d)]
            prefix = os.path.join(os.path.relpath(dirpath, root), "")
            found.extend([prefix + f for f in filenames if _visible(f) and f.lower().endswith(IMAGE_EXTENSIONS)])
        found.sort()
        relpaths.extend(found)
        labels.extend([label] * len(found))
    if not relpaths:
        raise LabkitFileNotFoundError(
            f"{root}: no image files (extensions {', '.join(IMAGE_EXTENSIONS)}) "
            f"in its class folders ({first(classes, 5)})"
        )
    return FolderIndex(root, classes, StringTable.from_strings(relpaths), np.asarray(labels, dtype=np.int64))
