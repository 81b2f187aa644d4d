"""A random-resized crop's box, drawn from an image's size alone, and the DCT scale that box allows.

torchvision's ``RandomResizedCrop`` draws its box after the decode; here the box is drawn from the header's
size *before* it, so a decoder can decode only the detail the box needs. Every decoder that crops
(`labkit.decode.registry`) takes a box from these functions, so they all crop the same pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch

from labkit.core.errors import LabkitValueError

DCT_SCALES = (8, 4, 2, 1)  # the power-of-two reductions libjpeg offers, largest first
#: torchvision's ``RandomResizedCrop`` defaults: the box's share of the image area, and its aspect ratio range.
DEFAULT_SCALE: Tuple[float, float] = (0.08, 1.0)
DEFAULT_RATIO: Tuple[float, float] = (3 / 4, 4 / 3)


@dataclass(frozen=True)
class CropBox:
    """A crop of an image of ``image_hw`` (height, width as displayed, EXIF orientation applied):
    rows ``top``..``top + height``, columns ``left``..``left + width``, then mirrored if ``flip``."""

    top: int
    left: int
    height: int
    width: int
    flip: bool
    image_hw: Tuple[int, int]

    def scaled(self, hw: Tuple[int, int]) -> Tuple[int, int, int, int]:
        """(top, left, bottom, right) of this box on the same image decoded at ``hw``, rounded to whole
        pixels and never empty: where a DCT-scaled decode's box lies."""
        fy, fx = hw[0] / self.image_hw[0], hw[1] / self.image_hw[1]
        top, left = min(hw[0] - 1, round(self.top * fy)), min(hw[1] - 1, round(self.left * fx))
        bottom = max(top + 1, min(hw[0], round((self.top + self.height) * fy)))
        right = max(left + 1, min(hw[1], round((self.left + self.width) * fx)))
        return top, left, bottom, right


def draw_box(height: int, width: int, rng: np.random.Generator, scale: Tuple[float, float] = DEFAULT_SCALE,
             ratio: Tuple[float, float] = DEFAULT_RATIO, flip: float = 0.5) -> CropBox:
    """torchvision's ``RandomResizedCrop.get_params`` (ten tries, then a central crop), then a flip with
    probability ``flip``, all drawn from ``rng``."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    found: Optional[Tuple[int, int, int, int]] = None
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            found = (int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w)
            break
    if found is None:  # the central crop of the ratio range nearest the image's own
        in_ratio = width / height
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            h, w = height, width
        found = ((height - h) // 2, (width - w) // 2, h, w)
    return CropBox(*found, flip=bool(rng.random() < flip), image_hw=(height, width))


def dct_scale(box: CropBox, output_hw: Tuple[int, int]) -> int:
    """The largest JPEG reduction (8, 4, 2 or 1) at which ``box`` still has at least ``output_hw`` pixels."""
    return reduction_for(box.height, box.width, output_hw)


def reduction_for(height: float, width: float, output_hw: Tuple[int, int]) -> int:
    """The largest of `DCT_SCALES` that keeps ``height`` x ``width`` at least ``output_hw``."""
    most = min(height / output_hw[0], width / output_hw[1])
    for scale in DCT_SCALES:
        if scale <= most:
            return scale
    return 1


def crop_resize_flip(image: torch.Tensor, box: CropBox, output_hw: Tuple[int, int]) -> torch.Tensor:
    """The same crop on a decoded uint8 (C, H, W) image: what a full decode, ``F.resized_crop`` and a flip give."""
    from torchvision.transforms.v2 import functional as F

    if tuple(image.shape[-2:]) != box.image_hw:
        raise LabkitValueError(f"the image is {tuple(image.shape[-2:])} but the box was drawn for {box.image_hw}")
    out = F.resized_crop(image, box.top, box.left, box.height, box.width, list(output_hw),
                         interpolation=F.InterpolationMode.BILINEAR, antialias=True)
    return (out.flip(-1) if box.flip else out).contiguous()
