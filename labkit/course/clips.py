"""Video-like clips stored as folders of JPEG frames (``root/<class>/<clip>/frameNNN.jpg``).

The heavy two-step preprocessing of seed section 4.3: decode every frame of a clip (stage 1),
then resize, crop and lay out as C×H×W (stage 2). The same two functions serve the
single-stage `ClipFolderDataset` and the two-stage `labkit.workers.staged_pipeline.StagedPipeline`, so the
two can be measured on identical work.
"""

from __future__ import annotations

import os
from typing import List, Tuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from labkit.core.errors import LabkitFileNotFoundError
from labkit.core.string_table import PathLike, StringTable
from labkit.decode.decoders import DecodeError, describe_failure, open_image


def scan_clips(root: PathLike) -> Tuple[List[str], StringTable, np.ndarray]:
    """Class names, clip folders (relative to ``root``) and labels of a clip tree."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise LabkitFileNotFoundError(f"{root}: not a folder; make clips with `labkit data --clips N --out {root}`")
    classes = sorted(d for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(os.path.join(root, d)))
    clips, labels = [], []
    for label, cls in enumerate(classes):
        for clip in sorted(os.listdir(os.path.join(root, cls))):
            if os.path.isdir(os.path.join(root, cls, clip)):
                clips.append(os.path.join(cls, clip))
                labels.append(label)
    if not clips:
        raise LabkitFileNotFoundError(f"{root}: no clip folders (root/<class>/<clip>/frameNNN.jpg)")
    return classes, StringTable.from_strings(clips), np.asarray(labels, dtype=np.int64)


def decode_clip(folder: str, frames: int, size: Tuple[int, int]) -> np.ndarray:
    """Stage 1: the first ``frames`` JPEG frames of a clip folder → uint8 array (T, H, W, 3).

    ``size`` is (height, width) of the stored frames, as everywhere in labkit; a frame of any other size
    is an error naming the file, because the shared-memory slots downstream have a fixed shape.
    """
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith((".jpg", ".jpeg")))[:frames]
    if len(names) < frames:
        raise DecodeError(f"{folder}: {len(names)} frames, need {frames}")
    height, width = size
    out = np.empty((frames, height, width, 3), dtype=np.uint8)
    for t, name in enumerate(names):
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            data = f.read()
        try:
            img = open_image(data)
            if img.size != (width, height):
                raise DecodeError(f"frame is {img.size[0]}x{img.size[1]} (width x height), expected {width}x{height}")
            out[t] = np.asarray(img.convert("RGB"))
        except (OSError, SyntaxError, ValueError) as e:  # DecodeError is a ValueError
            raise DecodeError(f"{path}: {e if isinstance(e, DecodeError) else describe_failure(data, e)}") from None
    return out


def transform_clip(frames: np.ndarray, out: int = 112, resize: int = 128) -> np.ndarray:
    """Stage 2: (T, H, W, 3) → resize the short side to ``resize``, centre-crop ``out``, (T, 3, out, out)."""
    t, h, w, _ = frames.shape
    scale = resize / min(h, w)
    new_w, new_h = max(out, round(w * scale)), max(out, round(h * scale))
    top, left = (new_h - out) // 2, (new_w - out) // 2
    result = np.empty((t, 3, out, out), dtype=np.uint8)
    for k in range(t):
        img = Image.fromarray(frames[k]).resize((new_w, new_h), Image.BILINEAR)
        result[k] = np.asarray(img)[top : top + out, left : left + out].transpose(2, 0, 1)
    return result


class ClipFolderDataset(Dataset):
    """Single-stage clip loading: both steps in one ``__getitem__``, for a DataLoader's workers."""

    def __init__(self, root: PathLike, frames: int, size: Tuple[int, int], out: int = 112) -> None:
        self.root = os.fspath(root)
        self.classes, self.clips, self.labels = scan_clips(root)
        self.frames, self.size, self.out = frames, tuple(size), out

    def __len__(self) -> int:
        return len(self.clips)

    def clip_path(self, index: int) -> str:
        return os.path.join(self.root, self.clips[index])

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        frames = decode_clip(self.clip_path(index), self.frames, self.size)
        return torch.from_numpy(transform_clip(frames, self.out)), int(self.labels[index])
