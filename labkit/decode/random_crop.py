"""Random-resized crops taken inside the decode: the training pipeline at the evaluation pipeline's speed.

``RandomResizedCrop(224)`` after a full decode pays for every pixel of the file and then throws most
of them away (the crop keeps 8-100 % of the area, 54 % on average). Here the crop box is drawn
*before* decoding, from the header's size alone, with torchvision's `RandomResizedCrop` algorithm
(same scale and ratio ranges, same ten tries and central fallback), so the JPEG decoder can be told
how much detail the box needs: ``pil-reduced`` asks libjpeg for the smallest DCT scale (1/2, 1/4,
1/8) at which the box is still at least the output size, and resizes only the box's pixels
(antialiased; PIL's region resize, exact to the sub-pixel, where the scaled box falls between pixels,
torch's faster uint8 kernel where the decode is at full scale). A decoder that cannot scale its decode (``pil``, ``torchvision``, a
PNG) decodes the whole image and crops the same box: the same pixels, within the DCT scaling's
difference, at the full decode's cost (`crops_in_decode` says which do).

Every draw comes from a generator seeded by (seed, epoch, index), never by which worker fetched the
sample or in what order: a resumed run, or a run with another ``num_workers``, draws the same boxes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
from PIL import Image

from labkit.core.errors import LabkitValueError
from labkit.decode.decoders import (EXIF_ORIENTATION, MAX_PIXELS, DecodeError, Size, describe_failure, get_decoder,
                                    open_image, target_hw, to_rgb)

#: The decoders that take the crop inside the decode (a DCT-scaled JPEG decode of only what the box needs).
CROP_IN_DECODE = ("pil-reduced",)
DCT_SCALES = (8, 4, 2, 1)  # the reductions libjpeg offers, largest first


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


@dataclass(frozen=True)
class RandomResizedCrop:
    """torchvision's ``RandomResizedCrop(size, scale, ratio)`` + ``RandomHorizontalFlip(flip)``, drawn per sample.

    ``size`` is the output (height, width) or one int for a square. `draw` gives the box for sample
    ``index`` in ``epoch``; `decode` decodes bytes straight to the cropped, resized, flipped uint8 image.
    """

    size: Size = 224
    scale: Tuple[float, float] = (0.08, 1.0)
    ratio: Tuple[float, float] = (3 / 4, 4 / 3)
    flip: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if target_hw(self.size) is None:
            raise LabkitValueError("RandomResizedCrop needs an output size (an int or (height, width)), not None")
        low, high = self.scale
        if not 0 < low <= high <= 1:
            raise LabkitValueError(f"scale={self.scale}: the box's share of the image area must be 0 < low <= high <= 1")
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise LabkitValueError(f"ratio={self.ratio}: aspect ratios (width / height) must be 0 < low <= high")
        if not 0 <= self.flip <= 1:
            raise LabkitValueError(f"flip={self.flip}: a probability, between 0 and 1")

    @property
    def output_hw(self) -> Tuple[int, int]:
        hw = target_hw(self.size)
        assert hw is not None  # refused in __post_init__
        return hw

    def generator(self, index: int, epoch: int = 0) -> np.random.Generator:
        """The generator of sample ``index``'s draws in ``epoch``: the same in any process, any order."""
        return np.random.default_rng([self.seed, epoch, index])

    def draw(self, height: int, width: int, index: int, epoch: int = 0) -> CropBox:
        """The box (torchvision's algorithm) and flip of sample ``index`` in ``epoch``, for an image of height x width."""
        return draw_box(height, width, self.generator(index, epoch), self.scale, self.ratio, self.flip)

    def decode(self, data: bytes, index: int, epoch: int = 0, decoder: str = "pil-reduced",
               max_pixels: int = MAX_PIXELS) -> torch.Tensor:
        """``data`` decoded to a uint8 (3, H, W) tensor of `output_hw`: sample ``index``'s crop in ``epoch``."""
        header = open_image(data, max_pixels)  # parsed once: on small images the header costs as much as the pixels
        box = self.draw(*displayed_hw(header), index, epoch)
        if not crops_in_decode(decoder):
            return _decode_then_crop(data, box, self.output_hw, decoder, max_pixels)
        return _decode_opened_box(header, data, box, self.output_hw)


def draw_box(height: int, width: int, rng: np.random.Generator, scale: Tuple[float, float] = (0.08, 1.0),
             ratio: Tuple[float, float] = (3 / 4, 4 / 3), flip: float = 0.5) -> CropBox:
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


def displayed_hw(header: Image.Image) -> Tuple[int, int]:
    """(height, width) of an opened image as shown, its EXIF orientation applied (header only, no pixels)."""
    w, h = header.size
    return (w, h) if header.getexif().get(EXIF_ORIENTATION, 1) in (5, 6, 7, 8) else (h, w)


def dct_scale(box: CropBox, output_hw: Tuple[int, int]) -> int:
    """The largest JPEG reduction (8, 4, 2 or 1) at which ``box`` still has at least ``output_hw`` pixels."""
    most = min(box.height / output_hw[0], box.width / output_hw[1])
    return next(s for s in DCT_SCALES if s <= most) if most >= 1 else 1


def crops_in_decode(decoder: str) -> bool:
    """Whether ``decoder`` decodes only the detail a crop box needs (else: a full decode, then the same box)."""
    get_decoder(decoder)  # an unknown name is an error that lists the known ones
    return decoder in CROP_IN_DECODE


def decode_box(data: bytes, box: CropBox, output_hw: Tuple[int, int], decoder: str = "pil-reduced",
               max_pixels: int = MAX_PIXELS) -> torch.Tensor:
    """``data`` decoded, cropped to ``box``, resized to ``output_hw`` (antialiased bilinear) and flipped
    if the box says so: a uint8 (3, H, W) tensor."""
    if not crops_in_decode(decoder):
        return _decode_then_crop(data, box, output_hw, decoder, max_pixels)
    return _decode_opened_box(open_image(data, max_pixels), data, box, output_hw)


def _decode_then_crop(data: bytes, box: CropBox, output_hw: Tuple[int, int], decoder: str,
                      max_pixels: int) -> torch.Tensor:
    full = get_decoder(decoder)(data, None, max_pixels)
    if tuple(full.shape[-2:]) != box.image_hw:
        raise DecodeError(f"decoded {tuple(full.shape[-2:])} but the box was drawn for {box.image_hw}")
    return crop_resize_flip(full, box, output_hw)


def _decode_opened_box(img: Image.Image, data: bytes, box: CropBox, output_hw: Tuple[int, int]) -> torch.Tensor:
    """The DCT-scaled decode of ``box`` from ``img``, the header `open_image` parsed from ``data``."""
    s = dct_scale(box, output_hw) if img.format == "JPEG" else 1
    try:
        if s > 1:  # the reduction is one number: the same in the stored orientation as in the shown one
            stored_w, stored_h = img.size
            img.draft("RGB", (max(1, stored_w // s), max(1, stored_h // s)))
        img = to_rgb(img)
        if s == 1:  # full detail: the box is whole pixels, and torch's uint8 kernel is the faster resize
            return crop_resize_flip(torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1), box, output_hw)
        # Scaled: the box falls between pixels; PIL resizes exactly that region, its sub-pixel edges included.
        fy, fx = img.size[1] / box.image_hw[0], img.size[0] / box.image_hw[1]
        region = (box.left * fx, box.top * fy, (box.left + box.width) * fx, (box.top + box.height) * fy)
        out = img.resize((output_hw[1], output_hw[0]), Image.BILINEAR, box=region)
    except (OSError, SyntaxError, ValueError) as e:
        raise DecodeError(describe_failure(data, e, f"cannot decode {img.format or 'image'}")) from None
    if box.flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return torch.from_numpy(np.array(out, dtype=np.uint8)).permute(2, 0, 1).contiguous()


def crop_resize_flip(image: torch.Tensor, box: CropBox, output_hw: Tuple[int, int]) -> torch.Tensor:
    """The same crop on a decoded uint8 (C, H, W) image: what a full decode, ``F.resized_crop`` and a flip give."""
    from torchvision.transforms.v2 import functional as F

    if tuple(image.shape[-2:]) != box.image_hw:
        raise LabkitValueError(f"the image is {tuple(image.shape[-2:])} but the box was drawn for {box.image_hw}")
    out = F.resized_crop(image, box.top, box.left, box.height, box.width, list(output_hw),
                         interpolation=F.InterpolationMode.BILINEAR, antialias=True)
    return (out.flip(-1) if box.flip else out).contiguous()
