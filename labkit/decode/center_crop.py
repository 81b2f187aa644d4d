"""The evaluation crop, taken inside the decode: torchvision's ``Resize(resize)`` + ``CenterCrop(size)``.

Validation and test images are resized so that their shorter side is ``resize`` (the aspect kept) and
the central ``size`` pixels are kept. `CenterCrop` finds that central box on the image as stored, from
the header's size alone, and hands it to the decoder like a training crop's box: a decoder that scales
its decode (``simplejpeg``, ``pil-reduced``) decodes at the smallest DCT scale that still has the detail,
then the box is resized to ``size`` (antialiased). The result is torchvision's within the rounding of the
box to whole pixels (a test holds it to 30 dB or more). It takes the same place as
`labkit.decode.random_crop.RandomResizedCrop` in every dataset (``crop=``), so that a training set and its
validation set differ only in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from labkit.core.errors import LabkitValueError
from labkit.decode.crop_box import CropBox, CropBoxes, image_sizes
from labkit.decode.decoder_contract import MAX_PIXELS, Size, output_hw_of, target_hw
from labkit.decode.registry import decoder_info


@dataclass(frozen=True)
class CenterCrop:
    """``Resize(resize)`` (shorter side, aspect kept) then ``CenterCrop(size)``, as torchvision's evaluation
    transforms, as one box decoded at the detail it needs. ``size``: an int for a square or (height, width)."""

    size: Size = 224
    resize: int = 256

    def __post_init__(self) -> None:
        hw = target_hw(self.size)
        if hw is None:
            raise LabkitValueError("CenterCrop needs an output size (an int or (height, width)), not None")
        if not isinstance(self.resize, int) or self.resize < max(hw):
            raise LabkitValueError(
                f"resize={self.resize!r}: the shorter side after the resize, a whole number of "
                f"pixels at least as large as the crop {hw} (torchvision's evaluation: 256 for 224)"
            )

    @property
    def output_hw(self) -> tuple[int, int]:
        """(height, width) of the images it makes."""
        return output_hw_of(self.size)

    def draw_many(self, image_hw: Any, indices: Any = None, epochs: Any = None) -> CropBoxes:
        """The central boxes of images of ``image_hw`` ((height, width) each), at once; the same for every
        sample and epoch (``indices`` and ``epochs`` are taken, as a random crop's are, and not used)."""
        hw = image_sizes(image_hw)
        height, width = hw[:, 0], hw[:, 1]
        shorter = np.minimum(height, width)
        f = shorter / self.resize  # stored pixels per pixel of the resized image
        resized_h = (self.resize * height / shorter).astype(np.int64)
        resized_w = (self.resize * width / shorter).astype(np.int64)
        out_h, out_w = self.output_hw
        top, left = np.rint((resized_h - out_h) / 2), np.rint((resized_w - out_w) / 2)  # torchvision's CenterCrop
        box_h = np.minimum(height, np.maximum(1, np.rint(out_h * f))).astype(np.int64)
        box_w = np.minimum(width, np.maximum(1, np.rint(out_w * f))).astype(np.int64)
        return CropBoxes(
            np.minimum(height - box_h, np.rint(top * f)).astype(np.int64),
            np.minimum(width - box_w, np.rint(left * f)).astype(np.int64),
            box_h,
            box_w,
            np.zeros(len(hw), dtype=bool),
            hw,
        )

    def draw(self, height: int, width: int, index: int = 0, epoch: int = 0) -> CropBox:
        """The central box of an image of height x width, the same for every sample and epoch."""
        return self.draw_many((height, width))[0]

    def decode(
        self, data: bytes, index: int = 0, epoch: int = 0, decoder: str = "pil-reduced", max_pixels: int = MAX_PIXELS
    ) -> torch.Tensor:
        """``data`` decoded to the uint8 (3, H, W) centre crop of `output_hw`."""
        return decoder_info(decoder).crop(data, lambda h, w: self.draw(h, w), self.output_hw, max_pixels)
