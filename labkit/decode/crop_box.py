"""A random-resized crop's box, drawn from an image's size alone, and the DCT scale that box allows.

torchvision's ``RandomResizedCrop`` draws its box after the decode; here the box is drawn from the header's
size *before* it, so a decoder can decode only the detail the box needs. Every decoder that crops
(`labkit.decode.registry`) takes a box from these functions, so they all crop the same pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from labkit.core.errors import LabkitValueError

DCT_SCALES = (8, 4, 2, 1)  # the power-of-two reductions libjpeg offers, largest first
#: torchvision's ``RandomResizedCrop`` defaults: the box's share of the image area, and its aspect ratio range.
DEFAULT_SCALE: tuple[float, float] = (0.08, 1.0)
DEFAULT_RATIO: tuple[float, float] = (3 / 4, 4 / 3)


@dataclass(frozen=True)
class CropBox:
    """A crop of an image of ``image_hw`` (height, width as displayed, EXIF orientation applied):
    rows ``top``..``top + height``, columns ``left``..``left + width``, then mirrored if ``flip``."""

    top: int
    left: int
    height: int
    width: int
    flip: bool
    image_hw: tuple[int, int]

    def scaled(self, hw: tuple[int, int]) -> tuple[int, int, int, int]:
        """(top, left, bottom, right) of this box on the same image decoded at ``hw``, rounded to whole
        pixels and never empty: where a DCT-scaled decode's box lies."""
        # `scaled_edges`'s rule for one box, in plain arithmetic: on a sample's own path a numpy call on one row costs
        # several times the sum (the tests hold the two equal)
        fy, fx = hw[0] / self.image_hw[0], hw[1] / self.image_hw[1]
        top, left = min(hw[0] - 1, round(self.top * fy)), min(hw[1] - 1, round(self.left * fx))
        bottom = max(top + 1, min(hw[0], round((self.top + self.height) * fy)))
        right = max(left + 1, min(hw[1], round((self.left + self.width) * fx)))
        return top, left, bottom, right


def scaled_edges(boxes: np.ndarray, image_hw: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """Boxes (rows of top, left, height, width, drawn on images of ``image_hw``) on the same images decoded at
    ``hw`` (rows of height, width): rows of (top, left, bottom, right), rounded to whole pixels, never empty."""
    fy, fx = hw[:, 0] / image_hw[:, 0], hw[:, 1] / image_hw[:, 1]
    top = np.minimum(hw[:, 0] - 1, np.rint(boxes[:, 0] * fy)).astype(np.int64)
    left = np.minimum(hw[:, 1] - 1, np.rint(boxes[:, 1] * fx)).astype(np.int64)
    bottom = np.maximum(top + 1, np.minimum(hw[:, 0], np.rint((boxes[:, 0] + boxes[:, 2]) * fy))).astype(np.int64)
    right = np.maximum(left + 1, np.minimum(hw[:, 1], np.rint((boxes[:, 1] + boxes[:, 3]) * fx))).astype(np.int64)
    return np.stack([top, left, bottom, right], 1)


#: Uniform draws per sample of a random-resized crop: ten tries of (area, log aspect ratio), then top, left and
#: flip. Draw ``k`` of a sample is the same whatever follows it, so a user of more draws (brightness, say) shares these.
CROP_DRAWS = 23
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of 64-bit words that spreads every input bit over the output."""
    x = (x ^ (x >> _S30)) * _MIX1
    x = (x ^ (x >> _S27)) * _MIX2
    return x ^ (x >> _S31)


def _words(values: Any, n: int) -> np.ndarray:
    """``values`` (one int, or one per sample) as ``n`` 64-bit words, negative ones by their two's complement."""
    return np.broadcast_to(np.asarray(values, dtype=np.int64), (n,)).astype(np.uint64)


def counter_uniforms(seed: int, epochs: Any, indices: Any, draws: int) -> np.ndarray:
    """A batch's random draws: row ``k`` holds ``draws`` uniforms in [0, 1) for sample ``indices[k]`` in
    ``epochs[k]`` (or one epoch for all).

    Counter-based: each value is a hash of (seed, epoch, index, draw number), as Philox and Threefry are keyed
    bijections of a counter, so it depends on nothing else: not the batch it came in, the worker, the batch size,
    or the order threads finish. A resumed run draws the same. One vectorised pass for the whole batch."""
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    n = len(indices)
    with np.errstate(over="ignore"):
        key = _mix(np.full(n, int(seed) & 0xFFFF_FFFF_FFFF_FFFF, dtype=np.uint64) + _GOLDEN)
        key = _mix((key + _GOLDEN) ^ _words(epochs, n))
        key = _mix((key + _GOLDEN) ^ indices.astype(np.uint64))
        counters = np.arange(1, draws + 1, dtype=np.uint64) * _GOLDEN  # SplitMix64's stream from that key
        words = _mix(key[:, None] + counters[None, :])
    return (words >> _S11).astype(np.float64) * 2.0**-53


@dataclass(frozen=True)
class CropBoxes:
    """A batch's boxes, one row per sample, as arrays: row ``k`` is the `CropBox` ``boxes[k]``."""

    top: np.ndarray
    left: np.ndarray
    height: np.ndarray
    width: np.ndarray
    flip: np.ndarray  #: bool
    image_hw: np.ndarray  #: (n, 2): each image's (height, width) as displayed

    def __len__(self) -> int:
        return len(self.top)

    def __getitem__(self, k: int) -> CropBox:
        return CropBox(
            int(self.top[k]),
            int(self.left[k]),
            int(self.height[k]),
            int(self.width[k]),
            bool(self.flip[k]),
            (int(self.image_hw[k, 0]), int(self.image_hw[k, 1])),
        )

    def on_decoded(self, hw: np.ndarray) -> np.ndarray:
        """`scaled_edges` of every box, on its image decoded at ``hw`` (rows of height, width)."""
        return scaled_edges(np.stack([self.top, self.left, self.height, self.width], 1), self.image_hw, hw)

    def reductions(self, output_hw: tuple[int, int]) -> np.ndarray:
        """Each box's `dct_scale`: the largest JPEG reduction that keeps it at least ``output_hw``."""
        most = np.minimum(self.height / output_hw[0], self.width / output_hw[1])
        scales = np.ones(len(most), dtype=np.int64)
        for scale in sorted(DCT_SCALES):
            scales = np.where(most >= scale, scale, scales)
        return scales


def image_sizes(image_hw: Any) -> np.ndarray:
    """Images' (height, width), one row each, as an (n, 2) int64 array."""
    return np.asarray(image_hw, dtype=np.int64).reshape(-1, 2)


def draw_boxes(
    image_hw: Any,
    uniforms: np.ndarray,
    scale: tuple[float, float] = DEFAULT_SCALE,
    ratio: tuple[float, float] = DEFAULT_RATIO,
    flip: float = 0.5,
) -> CropBoxes:
    """torchvision's ``RandomResizedCrop.get_params`` (ten tries, then a central crop) and a flip with probability
    ``flip``, for a whole batch at once: sample ``k``'s box in an image of ``image_hw[k]`` from its row of
    ``uniforms`` (`CROP_DRAWS` of them, as `counter_uniforms` gives)."""
    hw = image_sizes(image_hw)
    n = len(hw)
    u = np.asarray(uniforms, dtype=np.float64).reshape(n, -1)
    if u.shape[1] < CROP_DRAWS:
        raise LabkitValueError(f"{u.shape[1]} draws a sample; a random-resized crop takes {CROP_DRAWS}")
    height, width = hw[:, :1].astype(np.float64), hw[:, 1:].astype(np.float64)
    target = height * width * (scale[0] + u[:, 0:20:2] * (scale[1] - scale[0]))
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    aspect = np.exp(log_low + u[:, 1:20:2] * (log_high - log_low))
    w = np.rint(np.sqrt(target * aspect))
    h = np.rint(np.sqrt(target / aspect))
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = fits.argmax(1)
    rows = np.arange(n)
    box_h, box_w = h[rows, first].astype(np.int64), w[rows, first].astype(np.int64)
    img_h, img_w = hw[:, 0], hw[:, 1]
    top = np.minimum(np.floor(u[:, 20] * (img_h - box_h + 1)).astype(np.int64), img_h - box_h)
    left = np.minimum(np.floor(u[:, 21] * (img_w - box_w + 1)).astype(np.int64), img_w - box_w)
    # none of the ten fit: the central crop of the ratio range nearest the image's own
    in_ratio = img_w / img_h
    narrow, wide = in_ratio < min(ratio), in_ratio > max(ratio)
    central_w = np.where(narrow, img_w, np.where(wide, np.rint(img_h * max(ratio)), img_w)).astype(np.int64)
    central_h = np.where(narrow, np.rint(img_w / min(ratio)), img_h).astype(np.int64)
    missed = ~fits.any(1)
    box_h, box_w = np.where(missed, central_h, box_h), np.where(missed, central_w, box_w)
    top = np.where(missed, (img_h - central_h) // 2, top)
    left = np.where(missed, (img_w - central_w) // 2, left)
    return CropBoxes(top, left, box_h, box_w, u[:, 22] < flip, hw)


def box_from_draws(
    height: int,
    width: int,
    u: Sequence[float],
    scale: tuple[float, float] = DEFAULT_SCALE,
    ratio: tuple[float, float] = DEFAULT_RATIO,
    flip: float = 0.5,
) -> CropBox:
    """One sample's `draw_boxes`, written as torchvision's own ten-try loop over its row of draws: the path of a
    sample fetched alone (``ds[i]``, a decoder without a batch loop), where a vectorised call on one row costs more
    than the loop. The tests hold the two equal, box for box."""
    area = height * width
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    for t in range(10):
        target_area = area * (scale[0] + u[2 * t] * (scale[1] - scale[0]))
        aspect = math.exp(log_low + u[2 * t + 1] * (log_high - log_low))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = min(int(u[20] * (height - h + 1)), height - h)
            left = min(int(u[21] * (width - w + 1)), width - w)
            return CropBox(top, left, h, w, bool(u[22] < flip), (height, width))
    in_ratio = width / height  # none fits: the central crop of the ratio range nearest the image's own
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        h, w = height, width
    return CropBox((height - h) // 2, (width - w) // 2, h, w, bool(u[22] < flip), (height, width))


def whole_images(image_hw: Any) -> CropBoxes:
    """Each image whole, unflipped: the "box" of a plain resize."""
    hw = image_sizes(image_hw)
    zeros = np.zeros(len(hw), dtype=np.int64)
    return CropBoxes(zeros, zeros, hw[:, 0].copy(), hw[:, 1].copy(), np.zeros(len(hw), dtype=bool), hw)


def dct_scale(box: CropBox, output_hw: tuple[int, int]) -> int:
    """The largest JPEG reduction (8, 4, 2 or 1) at which ``box`` still has at least ``output_hw`` pixels."""
    return reduction_for(box.height, box.width, output_hw)


def reduction_for(height: float, width: float, output_hw: tuple[int, int]) -> int:
    """The largest of `DCT_SCALES` that keeps ``height`` x ``width`` at least ``output_hw``."""
    most = min(height / output_hw[0], width / output_hw[1])
    for scale in DCT_SCALES:
        if scale <= most:
            return scale
    return 1


def crop_resize_flip(image: torch.Tensor, box: CropBox, output_hw: tuple[int, int]) -> torch.Tensor:
    """The same crop on a decoded uint8 (C, H, W) image: what a full decode, ``F.resized_crop`` and a flip give."""
    from torchvision.transforms.v2 import functional as F

    if tuple(image.shape[-2:]) != box.image_hw:
        raise LabkitValueError(f"the image is {tuple(image.shape[-2:])} but the box was drawn for {box.image_hw}")
    out = F.resized_crop(
        image,
        box.top,
        box.left,
        box.height,
        box.width,
        list(output_hw),
        interpolation=F.InterpolationMode.BILINEAR,
        antialias=True,
    )
    return (out.flip(-1) if box.flip else out).contiguous()
