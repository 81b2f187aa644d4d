"""Samples that do not share one shape: what ``default_collate`` cannot stack (article section 2.3).

Image classification hands the collate function samples of one shape; detection, text and
graph tasks do not. The collate lab needs such samples, and its workers must be able to
unpickle the datasets that make them (a class defined in a notebook cannot be found by a
spawned worker), so they live here:

* `ShapesDetectionDataset` — the course's photos at a different size each, with 1 to
  ``max_objects`` shapes pasted on them and their boxes: images of different sizes and a
  different number of targets per image, as in object detection.
* `TokenSequenceDataset` — token-id sequences whose lengths spread like sentences'.
* `RandomGraphDataset` — small graphs with a different number of nodes and edges each.

Every sample is a pure function of ``(seed, index)``, so any worker makes the same sample.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from PIL import Image, ImageDraw
from torch.utils.data import Dataset

from labkit.core.errors import LabkitIndexError, LabkitValueError
from labkit.core.string_table import PathLike
from labkit.decode.registry import decode_image
from labkit.storage.pack_format import PackReader

#: The object classes `ShapesDetectionDataset` pastes, by label.
OBJECT_CLASSES = ("disk", "box", "triangle")
_OBJECT_COLORS = ((240, 240, 240), (20, 20, 20), (250, 200, 0))

Target = dict[str, torch.Tensor]


def _sample_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index])


class ShapesDetectionDataset(Dataset):
    """Detection samples ``(uint8 3×H×W image, {"boxes": float32 N×4, "labels": int64 N})``.

    Image ``i`` is photo ``i`` of an encoded pack decoded to a size drawn between ``min_side``
    and ``max_side`` for each side, with N (1 … ``max_objects``) shapes of `OBJECT_CLASSES`
    drawn on it; ``boxes`` are their bounding boxes as (x0, y0, x1, y1) in pixels, the layout
    torchvision's detection models take. ``len`` is the pack's, or ``n`` if smaller.
    """

    def __init__(
        self,
        pack_path: PathLike,
        n: int = 0,
        min_side: int = 96,
        max_side: int = 224,
        max_objects: int = 4,
        seed: int = 0,
        decoder: str = "pil-reduced",
    ) -> None:
        if not 16 <= min_side <= max_side:
            raise LabkitValueError(f"need 16 <= min_side <= max_side, got min_side={min_side}, max_side={max_side}")
        if max_objects < 1:
            raise LabkitValueError(f"max_objects must be >= 1, got {max_objects}")
        self.reader = PackReader(pack_path)
        if self.reader.kind != "encoded":
            raise LabkitValueError(
                f"{self.reader.path}: holds decoded arrays of one size; pass the encoded pack, whose "
                "images ShapesDetectionDataset decodes at a different size each"
            )
        self.n = len(self.reader) if n <= 0 else min(n, len(self.reader))
        self.min_side, self.max_side, self.max_objects = min_side, max_side, max_objects
        self.seed, self.decoder = seed, decoder

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, Target]:
        if not 0 <= index < self.n:
            raise LabkitIndexError(f"sample index {index} out of range for {self.n} samples")
        rng = _sample_rng(self.seed, index)
        h, w = (int(v) for v in rng.integers(self.min_side, self.max_side + 1, size=2))
        image = Image.fromarray(decode_image(self.reader.read(index), (h, w), self.decoder).permute(1, 2, 0).numpy())
        draw = ImageDraw.Draw(image)
        boxes, labels = [], []
        for _ in range(int(rng.integers(1, self.max_objects + 1))):
            label = int(rng.integers(len(OBJECT_CLASSES)))
            side = int(rng.integers(min(h, w) // 6, min(h, w) // 2 + 1))
            x0, y0 = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
            box = (x0, y0, x0 + side, y0 + side)
            color = _OBJECT_COLORS[label]
            if OBJECT_CLASSES[label] == "disk":
                draw.ellipse(box, fill=color)
            elif OBJECT_CLASSES[label] == "box":
                draw.rectangle(box, fill=color)
            else:
                draw.polygon([(x0 + side / 2, y0), (x0 + side, y0 + side), (x0, y0 + side)], fill=color)
            boxes.append(box)
            labels.append(label)
        tensor = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).contiguous()
        return tensor, {
            "boxes": torch.tensor(boxes, dtype=torch.float32),
            "labels": torch.tensor(labels, dtype=torch.int64),
        }

    def __repr__(self) -> str:
        return (
            f"ShapesDetectionDataset({os.path.basename(self.reader.path)!r}, {self.n} images of "
            f"{self.min_side}..{self.max_side} px, up to {self.max_objects} objects)"
        )


class TokenSequenceDataset(Dataset):
    """Text-like samples ``(int64 token ids of length L_i, int label)``.

    Lengths are log-normal between ``min_len`` and ``max_len`` (most sentences short, a few
    long), as real text is; that spread is what padding a batch to its longest member wastes.
    ``lengths`` gives every sample's length without making it (for grouping by length).
    """

    def __init__(
        self, n: int = 512, vocab: int = 1000, min_len: int = 4, max_len: int = 128, classes: int = 2, seed: int = 0
    ) -> None:
        if n < 1 or vocab < 2 or classes < 1 or not 1 <= min_len <= max_len:
            raise LabkitValueError(
                f"need n >= 1, vocab >= 2, classes >= 1 and 1 <= min_len <= max_len; got n={n}, "
                f"vocab={vocab}, classes={classes}, min_len={min_len}, max_len={max_len}"
            )
        self.n, self.vocab, self.classes, self.seed = n, vocab, classes, seed
        median = np.sqrt(min_len * max_len) / 2
        spread = np.random.default_rng([seed, n]).lognormal(np.log(median), 0.6, size=n)
        self.lengths = np.clip(np.round(spread), min_len, max_len).astype(np.int64)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if not 0 <= index < self.n:
            raise LabkitIndexError(f"sample index {index} out of range for {self.n} samples")
        tokens = _sample_rng(self.seed, index).integers(1, self.vocab, size=int(self.lengths[index]))  # 0 = padding
        return torch.from_numpy(tokens), index % self.classes


class RandomGraphDataset(Dataset):
    """Graph samples ``{"x": float32 N×F node features, "edge_index": int64 2×E, "y": int64 label}``.

    N is drawn between ``min_nodes`` and ``max_nodes``; each graph is a ring plus random
    chords, more of them in odd classes, so the label can be learnt from the structure. Edges
    are listed in both directions, as message-passing libraries expect.
    """

    def __init__(
        self, n: int = 256, min_nodes: int = 4, max_nodes: int = 24, features: int = 8, classes: int = 2, seed: int = 0
    ) -> None:
        if n < 1 or features < 1 or classes < 1 or not 3 <= min_nodes <= max_nodes:
            raise LabkitValueError(
                f"need n >= 1, features >= 1, classes >= 1 and 3 <= min_nodes <= max_nodes; got "
                f"n={n}, features={features}, classes={classes}, min_nodes={min_nodes}, "
                f"max_nodes={max_nodes}"
            )
        self.n, self.min_nodes, self.max_nodes = n, min_nodes, max_nodes
        self.features, self.classes, self.seed = features, classes, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < self.n:
            raise LabkitIndexError(f"sample index {index} out of range for {self.n} samples")
        rng = _sample_rng(self.seed, index)
        label = index % self.classes
        nodes = int(rng.integers(self.min_nodes, self.max_nodes + 1))
        ring = np.arange(nodes)
        chords = rng.integers(0, nodes, size=(2, nodes * (1 + label % 2) // 2))
        src = np.concatenate([ring, chords[0]])
        dst = np.concatenate([(ring + 1) % nodes, chords[1]])
        keep = src != dst  # no self-loops
        edges = np.stack([np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])])
        return {
            "x": torch.from_numpy(rng.standard_normal((nodes, self.features)).astype(np.float32)),
            "edge_index": torch.from_numpy(edges.astype(np.int64)),
            "y": torch.tensor(label, dtype=torch.int64),
        }
